/** The agent socket runtime: start it on a tree and a run dir; it serves one socket per agent. */
import { appendRecord } from "../store/jsonl.ts";
import { ensureDir, replaceFile } from "../store/atomic.ts";
import { RunIndex, sessionDirs } from "../store/runs.ts";
import type { OpContext } from "./ops.ts";
import type { Run } from "./recorder.ts";
import { groupsDir, type Reaped, reapGroups } from "./groups.ts";
import { listen, type Listener, unlisten } from "./server.ts";
import { TOOL_HOST, type ToolHost } from "./tools.ts";
import { toolCache } from "../tool/config.ts";

export type { Prepared, ToolHost, ToolResult, TshOptions } from "./tools.ts";
export { newRunId } from "./recorder.ts";
export type { Reaped } from "./groups.ts";

/** Options for {@link startRuntime}. */
export interface RuntimeOptions {
  /** The tree: the concrete generation directory (resolved once at startup). */
  root: string;
  /** Live socket dir: sockets go to `<run>/agent/<name>.sock`. */
  run: string;
  /** Run index file (default `<run>/runs.sqlite`); rebuilt from events.jsonl at every start. */
  index?: string;
  /** How long an approval_request waits for its answer (default 60 s). */
  approvalTimeoutMs?: number;
  /** The tool path; default: src/tool's sandboxed `runTsh`. */
  tools?: ToolHost;
  /**
   * The daemon's own `CTX_TOOL_CACHE` (tsh load/pin capacity, clamped 1..1024), handed to every
   * runTsh as `toolCache`; never put into a sandbox's environment. A non-integer is EINVAL here.
   */
  toolCache?: string;
}

/** A running runtime. */
export interface Runtime {
  /** Serves an agent's socket now (the FUSE create path and `ctx agent new` call this). */
  serve(name: string): Promise<string>;
  /** Stops serving an agent (its definition and sessions are untouched). */
  unserve(name: string): Promise<void>;
  /** Names of the agents being served. */
  agents(): string[];
  /** Runs interrupted by the previous daemon that startup closed as errors. */
  readonly recovered: string[];
  /** Agent process groups the previous daemon left running that startup stopped, and stale receipts. */
  readonly reaped: Reaped;
  /** Cancels live runs, closes every socket. */
  close(): Promise<void>;
}

function agentNames(root: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${root}/agent`)) {
    // Aliases (symlinks), controls (.d), sockets and temp names are not definitions.
    if (!e.isFile || e.name.startsWith(".") || e.name.endsWith(".sock")) continue;
    out.push(e.name);
  }
  return out.sort();
}

/** Closes runs a killed daemon left open: an EINTR error and `done{status:"error"}`, state `error`. */
function recover(index: RunIndex, root: string, run: string): string[] {
  const open = index.rebuild(sessionDirs(root, run));
  for (const r of open) {
    const ts = Date.now() / 1000;
    const events = `${r.dir}/events.jsonl`;
    appendRecord(events, {
      type: "error",
      run: r.run,
      code: "EINTR",
      message: "run interrupted: the runtime stopped before it finished",
    });
    appendRecord(events, { type: "done", run: r.run, status: "error", ts });
    replaceFile(`${r.dir}/state`, "error\n");
    index.finish(r.run, "error", ts);
  }
  return open.map((r) => r.run);
}

/** Starts the runtime: rebuilds the run index, closes interrupted runs, serves every agent. */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  toolCache(options.toolCache); // refuse a bad value at start, not on every tool call
  ensureDir(options.run, 0o755);
  // First: orphaned agent groups of a killed daemon must not outlive it into this one.
  const reaped = await reapGroups(groupsDir(options.run));
  const index = new RunIndex(options.index ?? `${options.run}/runs.sqlite`);
  const recovered = recover(index, options.root, options.run);
  const ctx: OpContext = {
    root: options.root,
    run: options.run,
    index,
    host: options.tools ?? TOOL_HOST,
    approvalTimeoutMs: options.approvalTimeoutMs ?? 60_000,
    toolCache: options.toolCache,
    active: new Map<string, Run>(),
    locks: new Map(),
  };
  const listeners = new Map<string, Listener>();
  const serve = async (name: string) => {
    const have = listeners.get(name);
    if (have) return have.path;
    const l = await listen(ctx, name);
    listeners.set(name, l);
    return l.path;
  };
  for (const name of agentNames(options.root)) await serve(name);
  return {
    serve,
    recovered,
    reaped,
    async unserve(name) {
      const l = listeners.get(name);
      listeners.delete(name);
      if (l) await unlisten(l);
      // The definition is gone: so is its alias (a daemon that merely stops leaves it dangling,
      // which clients read as "declared but down").
      try {
        Deno.removeSync(`${options.root}/agent/${name}.sock`);
      } catch { /* never linked */ }
    },
    agents: () => [...listeners.keys()].sort(),
    async close() {
      for (const r of [...ctx.active.values()]) await r.cancel();
      for (const l of listeners.values()) await unlisten(l);
      listeners.clear();
      index.close();
    },
  };
}
