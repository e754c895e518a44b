/** Runs one tool inside the agent view: authorize() again, exec of the checked inode, bounded output, a wall-clock bound. */
import { CtxError, exitCode, ignore, toCtxError } from "../abi/errno.ts";
import { authorize } from "./authorize.ts";
import { pickAllowed } from "../sandbox/env.ts";
import { Capture, utf8Cut } from "./capture.ts";
import { FS_TOOLS, MAX_INPUT } from "./fs.ts";
import { holdExecutable } from "./open.ts";
import { failed, ok, type ToolResult } from "./result.ts";
import { argsToInput, validate } from "./schema.ts";

/** Default wall-clock bound of one tool run, in milliseconds (tsh `--timeout`, runTsh `timeout`). */
export const DEFAULT_TIMEOUT_MS = 120_000;
/** How long a tool has after SIGTERM before its process group gets SIGKILL. */
export const GRACE_MS = 1000;
/**
 * Output read beyond the kept bound before the tool is ended. A tool that writes a little more
 * than the bound (a verbose build) finishes with its own status; a flood (`yes`) is ended within
 * milliseconds. Either way only `limit` bytes are ever kept.
 */
export const DRAIN_BYTES = 1 << 20;

/** Where and as whom the tool runs (tsh's own view). */
export interface ExecContext {
  /** Tree root on this side (`/ctx` in the sandbox). */
  root: string;
  /** Agent name (CTX_AGENT). */
  agent: string;
  /** The caller uid (from CTX_HOME). */
  uid: number;
  /** The view's CTX_PATH. */
  ctxPath: string[];
  /** tsh's environment (only allowlisted names are ever read from it). */
  env: Record<string, string | undefined>;
  /** Output bound in bytes. */
  limit: number;
  /** Wall-clock bound of a spawned tool in milliseconds (default {@link DEFAULT_TIMEOUT_MS}). */
  timeout?: number;
  /**
   * RLIMIT_NPROC each spawned tool runs under (soft and hard, through prlimit). The sandbox gives
   * tsh headroom above it, so a tool that exhausts its processes never starves tsh of threads.
   */
  nproc?: number;
}

/** Sends `signal` to the whole process group `pgid`; a group already gone is fine. */
function signalGroup(pgid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pgid, signal);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* ESRCH (Deno names it NotFound): nothing left in the group */
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The `bash` tool's fixed `-c` program. The command itself comes on stdin, never on bash's command
 * line (every local user can read /proc/<pid>/cmdline): the `read` builtin takes all of it (no
 * fork), stdin becomes /dev/null (what every tool gets), and eval runs it with the variable gone.
 */
export const BASH_FROM_STDIN =
  'IFS= read -r -d "" CTX_BASH_COMMAND; exec </dev/null; eval "unset CTX_BASH_COMMAND; $CTX_BASH_COMMAND"';

/**
 * The result of a tool its wall-clock bound (`timeout` ms) ended: the error first, then as much of
 * the partial output `out` as fits the `limit`.
 */
function timedOut(
  name: string,
  timeout: number,
  out: { bytes: Uint8Array; truncated: boolean },
  limit: number,
): ToolResult {
  const e = new CtxError(
    "ETIMEDOUT",
    `tool "${name}" ran longer than ${
      timeout / 1000
    } s (the wall-clock bound): its process group was ended`,
  );
  const head = new TextEncoder().encode(e.toString() + "\n");
  const body = out.bytes.subarray(0, utf8Cut(out.bytes, Math.max(0, limit - head.length)));
  return {
    name,
    status: "error",
    errno: "ETIMEDOUT",
    exitCode: exitCode("ETIMEDOUT"),
    content: new TextDecoder().decode(head) + new TextDecoder().decode(body),
    truncated: out.truncated || body.length < out.bytes.length,
  };
}

/**
 * Spawns `cmd` in a process group of its own (a new session) with exactly the allowed environment.
 * Output is read while the tool runs and bounded as it arrives. The group is ended (SIGTERM, then
 * SIGKILL after {@link GRACE_MS}) when the output floods, when the wall-clock bound passes, and
 * when the tool's main process exits (background processes it left would hold the pipes open).
 */
async function spawn(
  name: string,
  cmd: string,
  args: string[],
  ctx: ExecContext,
  input?: string,
): Promise<ToolResult> {
  const limited = ctx.nproc === undefined
    ? [cmd, ...args]
    : ["/usr/bin/prlimit", `--nproc=${ctx.nproc}`, "--", cmd, ...args];
  const child = new Deno.Command(limited[0], {
    args: limited.slice(1),
    clearEnv: true,
    env: pickAllowed(ctx.env),
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    detached: true, // setsid(): the tool leads its own process group, which we can end as one
  }).spawn();
  const pgid = child.pid;
  // Written while the tool runs (a tool that exits without reading it is fine: EPIPE is ignored).
  const fed = input === undefined ? Promise.resolve() : (async () => {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(input));
    await w.close();
  })().catch(() => {});
  let ended: "flood" | "timeout" | undefined;
  let kill: ReturnType<typeof setTimeout> | undefined;
  const end = (why: "flood" | "timeout") => {
    if (ended) return;
    ended = why;
    signalGroup(pgid, "SIGTERM");
    kill = setTimeout(() => signalGroup(pgid, "SIGKILL"), GRACE_MS);
    cap.stop();
  };
  const cap = new Capture({
    limit: ctx.limit,
    drain: ctx.limit + DRAIN_BYTES,
    onFlood: () => end("flood"),
  });
  const timeout = ctx.timeout ?? DEFAULT_TIMEOUT_MS;
  const timer = setTimeout(() => end("timeout"), timeout);
  const pumps = Promise.all([cap.pump(child.stdout, 0), cap.pump(child.stderr, 1)]);
  try {
    const status = await child.status;
    clearTimeout(timer);
    // The main process is gone; whatever it left in its group is ended too, and the pipes are
    // read to EOF for at most the grace period (a process that left the group may hold them).
    signalGroup(pgid, "SIGTERM");
    const drained = await Promise.race([pumps.then(() => true), sleep(GRACE_MS).then(() => false)]);
    signalGroup(pgid, "SIGKILL");
    if (!drained) cap.stop();
    await pumps;
    await fed;
    const out = cap.result();
    if (ended === "timeout") return timedOut(name, timeout, out, ctx.limit);
    // A flooded tool reports how it really ended (143 for SIGTERM, 137 for SIGKILL): it did not
    // finish, and `truncated` says why. A tool that exits before the signal keeps its own status.
    return {
      name,
      status: status.code === 0 ? "ok" : "error",
      exitCode: status.code,
      content: new TextDecoder().decode(out.bytes),
      truncated: out.truncated,
    };
  } finally {
    clearTimeout(timer);
    if (kill !== undefined) clearTimeout(kill);
  }
}

/**
 * Runs `name ARGS` for the agent: the authority check is made here, on every call, from fresh
 * controls; nothing is spawned or written when it denies.
 */
export async function runTool(name: string, args: string[], ctx: ExecContext): Promise<ToolResult> {
  const v = authorize({ agent: ctx.agent, tool: name, root: ctx.root, uid: ctx.uid }, {
    ctxPath: ctx.ctxPath,
  });
  if (!v.allow) return failed(name, new CtxError(v.errno as never, v.reason));
  try {
    const t = v.tool;
    if (t.builtin !== undefined) {
      const input = argsToInput(args, t.schema ?? {});
      const size = new TextEncoder().encode(JSON.stringify(input)).length;
      if (size > MAX_INPUT) {
        throw new CtxError("E2BIG", `tool input is ${size} bytes; the bound is ${MAX_INPUT}`);
      }
      if (t.schema) validate(input, t.schema);
      const fn = FS_TOOLS[t.builtin];
      if (fn) {
        const out = fn(input, ctx.limit);
        return ok(name, out.content, out.truncated);
      }
      if (t.builtin === "bash") {
        const command = String(input.command);
        if (command.includes("\0")) {
          throw new CtxError("EINVAL", "bash command contains a NUL byte");
        }
        return await spawn(name, "/bin/bash", ["-c", BASH_FROM_STDIN], ctx, command);
      }
      throw new CtxError("ENOSYS", `built-in "${t.builtin}" is not implemented by this tsh`);
    }
    // An ordinary executable: argv passthrough. It is exec'd through the descriptor of the inode
    // authorize() checked, never by its name again, so a swap after the check cannot run.
    const held = await holdExecutable(t.host, { dev: t.dev, ino: t.ino });
    try {
      return await spawn(name, held.path, args, ctx);
    } finally {
      held.close();
    }
  } catch (e) {
    return failed(name, toCtxError(e));
  }
}
