/** The agent socket runtime of one agent's instance: start it on a tree and a run dir; it serves the one socket its host handed over. */
import { errorOf } from "../abi/frames.ts";
import { ignore, toCtxError } from "../abi/errno.ts";
import { loadAgent } from "../store/agent.ts";
import { ensureDir } from "../store/atomic.ts";
import { RunIndex } from "../store/runs.ts";
import { appendEvent, checkSession, readEvents, setState } from "../store/session/files.ts";
import { findSessions } from "../store/session/index.ts";
import type { SessionRef } from "../store/session/ref.ts";
import type { OpContext } from "./ops.ts";
import type { Run } from "./recorder.ts";
import { groupsDir, type Reaped, reapGroups } from "./groups.ts";
import { peerWorkspace, type Workspace } from "./peer.ts";
import { type AgentStatus, Presence } from "./presence.ts";
import { adoptConn, type Listener, listenFd, unlisten } from "./server.ts";
import { TOOL_HOST, type ToolHost } from "./tools.ts";
import { toolCache } from "../tool/config.ts";

export type { Prepared, ToolHost, ToolResult, TshOptions } from "./tools.ts";
export { newRunId } from "./recorder.ts";
export type { Reaped } from "./groups.ts";

/** Options for {@link startRuntime}. */
export interface RuntimeOptions {
  /** The tree: the concrete generation directory (resolved once at startup). */
  root: string;
  /** Live socket dir: the host's sockets are `<run>/agent/<name>.sock`. */
  run: string;
  /** Run index file (default `<run>/index/<agent>.sqlite`); rebuilt from events.jsonl at every start. */
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
  /** The FUSE mount projecting `root` (cortexfsd passes it): a client cwd inside it names the tree. */
  mount?: string;
  /**
   * Serve this one agent only (its sessions, its step groups, its own index) on the listening
   * socket `fd` handed over by the host.
   */
  instance: {
    agent: string;
    fd: number;
    /**
     * A connection accepted on `fd` by the host (which admitted its peer by the owner rule): it
     * is served like one accepted here, every check made again.
     */
    conn?: number;
    /**
     * Where its status goes: the host writes `status`/`pid` from these reports (the instance
     * writes no projection); resolves once the host has. Absent: written here.
     */
    report?: (status: AgentStatus) => Promise<void>;
    /**
     * The host's check of an accepted connection's peer (src/runtime/channel.ts): the instance
     * has no capability for the peer's `/proc` reads. Absent: made here.
     */
    peer?: (fd: number) => Promise<Workspace>;
  };
  /** Hears every connection open/close and run start/end (an instance's idle clock). */
  changed?: () => void;
}

/** A running runtime. */
export interface Runtime {
  /** Runs interrupted by the previous daemon that startup closed as errors. */
  readonly recovered: string[];
  /**
   * Sessions startup could not read or close (a torn or foreign history, an unreadable file):
   * skipped, logged to stderr, never repaired; every request to one answers EIO with its path.
   */
  readonly broken: Broken[];
  /** Agent process groups the previous daemon left running that startup stopped, and stale receipts. */
  readonly reaped: Reaped;
  /** Live connections and live runs together (0: idle). */
  activity(): number;
  /** Durable cancel of every live run (`cancel` + `done{status:"cancelled"}` recorded). */
  cancelAll(): Promise<void>;
  /** Interrupts live runs (EINTR), closes every socket. */
  close(): Promise<void>;
}

/** A session startup skipped, and why. */
export interface Broken {
  /** The session directory. */
  dir: string;
  errno: string;
  message: string;
}

/**
 * The identity owning an agent's sessions: the agent's own (uid, gid, groups) when it still
 * exists and, for sessions found under `home/<uid>`, has that uid; undefined otherwise.
 */
function identityOf(root: string) {
  return (agent: string, uid?: number) => {
    try {
      const d = loadAgent(root, agent);
      if (uid === undefined || d.uid === uid) return { uid: d.uid, gid: d.gid, groups: d.groups };
    } catch (e) {
      ignore(e, "ENOENT", "EINVAL", "EACCES"); /* gone or unreadable: no identity of its own */
    }
    return undefined;
  };
}

function note(list: Broken[], dir: string, e: unknown): void {
  const err = toCtxError(e);
  list.push({ dir, errno: err.errno, message: err.message });
  console.error(
    `cortexfsd: runtime: skipping ${dir}: ${err.errno}: ${err.message} (not served until repaired and restarted)`,
  );
}

/**
 * Rebuilds the run index from every session's events (each read as its owner), then closes the
 * runs a killed daemon left open: an EINTR error and `done{status:"error"}`, state `error`. A
 * session that cannot be read or closed is isolated in `broken`; the others are served.
 */
function recover(index: RunIndex, sessions: SessionRef[]) {
  const broken: Broken[] = [];
  const byDir = new Map(sessions.map((r) => [r.dir, r]));
  function* histories() {
    for (const ref of sessions) {
      let events: unknown[];
      try {
        // Every file it would read must be a regular file: a planted FIFO never stalls startup.
        checkSession(ref);
        events = readEvents(ref);
      } catch (e) {
        note(broken, ref.dir, e);
        continue;
      }
      yield { dir: ref.dir, events };
    }
  }
  const open = index.rebuild(histories());
  const recovered: string[] = [];
  for (const r of open) {
    const ref = byDir.get(r.dir) as SessionRef; // rebuild only yields dirs it was given
    const ts = Date.now() / 1000;
    try {
      appendEvent(
        ref,
        errorOf("EINTR", "run interrupted: the runtime stopped before it finished", { run: r.run }),
      );
      appendEvent(ref, { type: "done", run: r.run, status: "error", ts });
      setState(ref, "error");
    } catch (e) {
      note(broken, ref.dir, e);
      continue;
    }
    index.finish(r.run, "error", ts);
    recovered.push(r.run);
  }
  return { recovered, broken };
}

/** Writes to stderr; a host that is gone (EPIPE) must not fail a run. */
function toStderr(text: string): void {
  try {
    Deno.stderr.writeSync(new TextEncoder().encode(text));
  } catch { /* any kind: a diagnostic must never fail a run (EPIPE: nobody reads it any more) */ }
}

/** The run dir's parts, each as tight as its users allow. */
function prepareRun(run: string): void {
  ensureDir(run, 0o755);
  // Clients reach `agent/<n>.sock` by name (search permission), nobody needs to list them;
  // temp sessions are entered only as their owner; receipts are root's alone.
  const dirs = [["agent", 0o711], ["temp", 0o711], ["groups", 0o700], ["index", 0o700]] as const;
  for (const [d, mode] of dirs) {
    ensureDir(`${run}/${d}`, mode);
    Deno.chmodSync(`${run}/${d}`, mode); // an older daemon made them 0755
  }
}

/**
 * Starts the runtime: rebuilds the agent's run index, closes its interrupted runs, serves its
 * handed-over socket (that agent's sessions only).
 */
export async function startRuntime(options: RuntimeOptions): Promise<Runtime> {
  toolCache(options.toolCache); // refuse a bad value at start, not on every tool call
  prepareRun(options.run);
  const one = options.instance;
  // First: orphaned agent groups of a killed daemon must not outlive it into this one.
  const reaped = await reapGroups(groupsDir(options.run), { agent: one.agent });
  const index = new RunIndex(options.index ?? `${options.run}/index/${one.agent}.sqlite`);
  const sessions = findSessions(options.root, options.run, identityOf(options.root), {
    agent: one.agent,
  });
  const { recovered, broken } = recover(index, sessions);
  // An instance's agent log has one writer, its host: the lines go to stderr, which the host reads.
  const presence = new Presence(options.root, {
    changed: options.changed,
    log: (_name, lines) => toStderr(lines),
    report: one.report,
  });
  const peer = one.peer;
  const ctx: OpContext = {
    root: options.root,
    run: options.run,
    index,
    host: options.tools ?? TOOL_HOST,
    approvalTimeoutMs: options.approvalTimeoutMs ?? 60_000,
    toolCache: options.toolCache,
    mount: options.mount,
    active: new Map<string, Run>(),
    locks: new Map(),
    broken: new Map(broken.map((b) => [b.dir, `${b.errno}: ${b.message}`])),
    presence,
    peers: new Map(),
    changed: options.changed,
    workspaceOf: peer ? (fd) => peer(fd) : (fd, pid) => Promise.resolve(peerWorkspace(fd, pid)),
  };
  const listeners = new Map<string, Listener>();
  const l = await listenFd(ctx, one.agent, one.fd); // an instance that cannot serve fails whole
  listeners.set(one.agent, l);
  await presence.serve(one.agent);
  if (one.conn !== undefined) adoptConn(ctx, l, one.conn);
  const countConns = () => {
    let n = 0;
    for (const l of listeners.values()) n += l.conns.size;
    return n;
  };
  return {
    recovered,
    broken,
    reaped,
    activity: () => countConns() + ctx.active.size,
    async cancelAll() {
      await Promise.all([...ctx.active.values()].map((r) => r.cancel()));
    },
    async close() {
      for (const r of [...ctx.active.values()]) await r.interrupt(); // EINTR, not a cancel
      for (const l of listeners.values()) {
        await unlisten(l);
        await presence.unserve(l.name, "idle");
      }
      listeners.clear();
      index.close();
    },
  };
}
