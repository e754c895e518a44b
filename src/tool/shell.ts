/** tsh: the agent-facing tool shell (built-ins, one-shot runs, --json frames, a line-editing REPL). */
import { isTshBuiltin, TSH_BUILTINS } from "../abi/builtin.ts";
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import { runTool } from "./exec.ts";
import { openNoFollow } from "./open.ts";
import { failed, ok, type ToolResult } from "./result.ts";
import { mapView, resolveTool } from "./resolve.ts";
import { load, readState, unload, unpin, writeState } from "./state.ts";
import { cacheBounds, readTshConfig } from "./config.ts";

/** tsh's resolved view of where it runs. */
export interface ShellContext {
  root: string;
  agent?: string;
  uid: number;
  ctxPath: string[];
  /** HOME: where load/pin state lives. */
  home?: string;
  env: Record<string, string | undefined>;
  limit: number;
  /** CTX_TOOL_CACHE as given to tsh (`--cache`), already clamped; it wins over the config. */
  cache?: number;
  /** Wall-clock bound of a spawned tool in milliseconds (`--timeout`; default 120 s). */
  timeout?: number;
  /** RLIMIT_NPROC of every spawned tool (`--nproc`): tsh itself runs with headroom above it. */
  nproc?: number;
}

function text(dir: string, name: string): string {
  try {
    return Deno.readTextFileSync(`${dir}/${name}`).trim();
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.PermissionDenied);
    return "";
  }
}

/** Every tool name visible through CTX_PATH, first hit winning, sorted. */
function visible(ctx: ShellContext): { name: string; path: string; dir: string }[] {
  const seen = new Map<string, { name: string; path: string; dir: string }>();
  for (const d of ctx.ctxPath) {
    const host = mapView(ctx.root, d);
    if (host === null) continue;
    let entries: Deno.DirEntry[] = [];
    try {
      entries = [...Deno.readDirSync(host)];
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.PermissionDenied);
      continue;
    }
    for (const e of entries) {
      if (seen.has(e.name) || e.name.endsWith(".d") || e.name.endsWith(".sock")) continue;
      const hit = resolveTool(e.name, { root: ctx.root, ctxPath: [d] });
      if (hit) seen.set(e.name, { name: e.name, path: hit.path, dir: hit.dir });
    }
  }
  return [...seen.values()].sort((a, b) => a.name < b.name ? -1 : 1);
}

function need(args: string[], op: string): string {
  if (args.length !== 1) throw new CtxError("EINVAL", `usage: ${TSH_BUILTINS[op]}`);
  return args[0];
}

function found(ctx: ShellContext, name: string) {
  const hit = resolveTool(name, { root: ctx.root, ctxPath: ctx.ctxPath });
  if (!hit) {
    throw new CtxError("ENOENT", `${name}: not found in CTX_PATH ${ctx.ctxPath.join(":")}`);
  }
  return hit;
}

function home(ctx: ShellContext): string {
  if (!ctx.home) throw new CtxError("EINVAL", "HOME is not set: no place for tsh state");
  return ctx.home;
}

function builtin(op: string, args: string[], ctx: ShellContext): ToolResult {
  switch (op) {
    case "help": {
      if (args.length === 0) {
        return ok(op, Object.values(TSH_BUILTINS).join("\n") + "\nTOOL [ARGS...]: run a tool\n");
      }
      const hit = found(ctx, need(args, op));
      const schema = text(hit.dir, "schema");
      return ok(op, `${args[0]}: ${text(hit.dir, "description")}\n${schema ? schema + "\n" : ""}`);
    }
    case "tools": {
      const long = args[0] === "-l";
      const rows = visible(ctx).map((t) =>
        long ? `${t.name}\t${t.path}\t${text(t.dir, "description")}` : t.name
      );
      return ok(op, rows.map((r) => r + "\n").join(""));
    }
    case "which":
    case "type":
      return ok(op, found(ctx, need(args, op)).path + "\n");
    case "command":
      if (args[0] !== "-v") throw new CtxError("EINVAL", `usage: ${TSH_BUILTINS[op]}`);
      return ok(op, found(ctx, need(args.slice(1), op)).path + "\n");
    case "load":
    case "pin": {
      const name = need(args, op);
      const hit = found(ctx, name);
      openNoFollow(hit.host); // a symlinked tool is refused here too
      const state = readState(home(ctx));
      // Read now, like every control: a changed tool/tsh.d/config applies to the next load.
      const bounds = cacheBounds(readTshConfig(ctx.root), ctx.cache);
      const evicted = load(state, {
        name,
        path: hit.path,
        description: text(hit.dir, "description"),
      }, { pin: op === "pin", ...bounds });
      writeState(home(ctx), state);
      const ev = evicted.length ? ` (evicted ${evicted.join(", ")})` : "";
      return ok(op, `${op === "pin" ? "pinned" : "loaded"} ${name}${ev}\n`);
    }
    case "unload":
    case "unpin": {
      const name = need(args, op);
      const state = readState(home(ctx));
      const changed = op === "unload" ? unload(state, name) : unpin(state, name);
      if (!changed) {
        throw new CtxError("ENOENT", `${name} is not ${op === "unload" ? "loaded" : "pinned"}`);
      }
      writeState(home(ctx), state);
      return ok(op, `${op === "unload" ? "unloaded" : "unpinned"} ${name}\n`);
    }
    case "loads":
    case "pins": {
      const state = readState(home(ctx));
      const rows = state.loaded
        .filter((l) => op === "loads" || l.pinned)
        .map((l) => `${l.name}${op === "loads" && l.pinned ? " *" : ""}\n`);
      return ok(op, rows.join(""));
    }
    case "exit":
      return ok(op, "");
  }
  throw new CtxError("ENOSYS", `unknown built-in ${op}`);
}

/** Runs one tsh operation (a built-in or a tool) and returns its normalized result. */
export async function operate(args: string[], ctx: ShellContext): Promise<ToolResult> {
  const [op, ...rest] = args;
  if (op === undefined) return failed("tsh", new CtxError("EINVAL", "no operation"));
  try {
    if (isTshBuiltin(op)) return builtin(op, rest, ctx);
    if (!ctx.agent) {
      throw new CtxError(
        "EACCES",
        `running ${op} needs an agent view (CTX_AGENT): use ctx agent tsh or ctx agent attach`,
      );
    }
    return await runTool(op, rest, { ...ctx, agent: ctx.agent });
  } catch (e) {
    return failed(op, toCtxError(e));
  }
}

/** Splits a REPL line into words: whitespace-separated, with '...' and "..." quoting. */
export function words(line: string): string[] {
  const out: string[] = [];
  const re = /'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g;
  let cur = "";
  let last = -1;
  for (const m of line.matchAll(re)) {
    const piece = m[1] ?? (m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3]);
    if (last === m.index) cur += piece;
    else {
      if (last !== -1) out.push(cur);
      cur = piece;
    }
    last = m.index + m[0].length;
  }
  if (last !== -1) out.push(cur);
  return out;
}
