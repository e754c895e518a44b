/** Runs a profile under bubblewrap: no fd above 2 leaks in, and a --block-fd gate holds the command until the receipt is recorded. */
import { CtxError, errnoName, ignore } from "../abi/errno.ts";
import { close, cstr, F, fcntl, O, open, pwrite } from "../sys/libc.ts";
import { asSender } from "../sys/fsid.ts";
import { closeFd, pidfdSignal } from "../sys/sock.ts";
import { waitExits } from "../sys/wait.ts";
import { type HostLayout, hostLayout, profile, type SandboxSpec } from "./profile.ts";
import { bootId, pinProcess, type Receipt, receiptSeen, startTime } from "./receipt.ts";

const SIGKILL = 9;

/** Options for {@link launch}. */
export interface LaunchOptions {
  /** Bytes given to the command's stdin after the gate opens (default: none, EOF). */
  stdin?: Uint8Array;
  /** Aborting kills the sandbox init, which takes the whole pid namespace with it. */
  signal?: AbortSignal;
  /** Bytes kept of stdout and of stderr each; the rest is drained and counted (default 1 MiB). */
  limit?: number;
  /** Called with the receipt before the command is released. */
  onReceipt?: (r: Receipt) => void;
  /** Host layout override (tests). */
  layout?: HostLayout;
  /** Kill the sandbox when the launching thread exits (default true). */
  dieWithParent?: boolean;
}

/** The outcome of one sandboxed command. */
export interface LaunchResult {
  /** The receipt recorded before release. */
  receipt: Receipt;
  /** The command's exit code (bwrap passes it through); 128+n for a signal. */
  code: number;
  /** Bounded stdout and stderr. */
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** True when either stream exceeded the limit. */
  truncated: boolean;
}

/** bash: closes every fd above 2 this shell inherited (not every fd is close-on-exec) but `keep`. */
export function closeFds(keep: readonly number[] = []): string {
  const spare = keep.map((fd) => ` && [ "$n" != ${fd} ]`).join("");
  return `for p in /proc/$$/fd/*; do n=\${p##*/}; if [ "$n" -gt 2 ]${spare}; then exec {n}>&-; fi; done`;
}

/** The fds bwrap gets its --info-fd and --block-fd on: the two lowest above 2 that `fds` leave free. */
export function gateFds(fds: readonly number[]): { info: number; block: number } {
  const free: number[] = [];
  for (let n = 3; free.length < 2; n++) if (!fds.includes(n)) free.push(n);
  return { info: free[0], block: free[1] };
}

/**
 * The gate script. Each host fd of the profile reaches it inherited at its own number (see
 * {@link inheriting}; ctxterm's posix_spawn passes them the same way), and bwrap's `--bind-fd`
 * names it by that number: nothing is renumbered (bash's redirection onto an fd that is open
 * keeps a copy at the lowest free fd from 10 and closes that number after: `exec 10<&6 11<&5`
 * with 10 open loses 11), and no path is opened (reopening a 0700 directory through /proc needed
 * CAP_DAC_READ_SEARCH). The gate checks that each is open, closes every other fd above 2 (Deno's
 * node:net listener is not close-on-exec: platform-notes), sets the umask spawned processes get
 * (never the daemon's: the mount serves with umask 0), and makes the info fd (bwrap --info-fd) a
 * copy of stdout and the block fd (--block-fd) a copy of stdin ({@link gateFds}). bwrap closes
 * those and each bound fd in the child, so the command starts with exactly fds 0-2. The numbers
 * come from our own profile, never from a peer.
 */
export function gate(
  fds: readonly number[],
  options: { umask?: number; gated?: boolean } = {},
): string {
  for (const fd of fds) {
    if (!Number.isInteger(fd) || fd <= 2) {
      throw new CtxError("EINVAL", `cannot hand fd ${fd} to the sandbox: not an fd above 2`);
    }
  }
  const mask = (options.umask ?? 0o022).toString(8).padStart(4, "0");
  const { info, block } = gateFds(fds);
  // A duplication that fails (an fd that is not open) stops the gate: bwrap would start without
  // it, and its half-built sandbox would hold our pipes open. `<&n` only duplicates: no open.
  return [
    ...(fds.length ? [`true${fds.map((fd) => ` <&${fd}`).join("")} || exit 126`] : []),
    closeFds(fds),
    `umask ${mask}`,
    ...(options.gated ?? true ? [`exec ${info}>&1 ${block}<&0 || exit 126`] : []),
    `exec "$@"`,
  ].join("\n");
}

/**
 * Calls `spawn`, which must fork and exec before it returns (`Deno.Command#spawn` does, on this
 * thread), with `fds` inheritable: their FD_CLOEXEC is cleared for the call and set again right
 * after it, in a `finally` (a failed spawn too). Deno.Command cannot pass an fd otherwise.
 *
 * Nothing else can inherit them meanwhile: the window is synchronous JS on the one thread that
 * spawns. In a runtime instance (and in ctx and ctxterm) every spawn (Deno.Command,
 * node:child_process) runs on the JS thread; there is no Worker (the only one, the FUSE mount's
 * in src/fuse/thread.ts, runs in the host cortexfsd, which never calls this); FFI calls marked
 * nonblocking (poll, fsync, umount2, waitpid) run on Deno's blocking pool and never fork. A
 * process that did fork from another thread must not use this. ctxterm's PTY spawn does not: its
 * posix_spawn clears FD_CLOEXEC in the child only (src/sys/pty.ts).
 */
export function inheriting<T>(fds: readonly number[], spawn: () => T): T {
  const cleared: number[] = [];
  try {
    for (const fd of fds) {
      const r = fcntl(fd, F.SETFD, 0);
      if (r < 0) throw new CtxError(errnoName(-r), `cannot hand fd ${fd} to the sandbox`);
      cleared.push(fd);
    }
    return spawn();
  } finally {
    // Always close-on-exec after, whatever it was: an fd of a profile is never for another
    // spawn. F_SETFD fails only on an fd that is not open (EBADF), which nothing can inherit.
    for (const fd of cleared) fcntl(fd, F.SETFD, F.FD_CLOEXEC);
  }
}

let cachedLayout: HostLayout | undefined;

/**
 * An unnamed file (O_TMPFILE in `dir`, 0600, never linked) holding `words` NUL-separated, at
 * offset 0, for bwrap's `--args <fd>`: bwrap reads it whole and closes it in the child. The
 * environment's words travel this way because every local user can read an argv
 * (/proc/<pid>/cmdline); an open fd of this process is readable only by whoever may ptrace it.
 */
export function envFd(dir: string, words: readonly string[]): number {
  const fd = open(cstr(dir), O.TMPFILE | O.RDWR, 0o600);
  if (fd < 0) {
    throw new CtxError(errnoName(-fd), `cannot make the sandbox's environment file in ${dir}`);
  }
  try {
    const bytes = new TextEncoder().encode(words.map((w) => w + "\0").join(""));
    // pwrite: the file offset stays 0, where bwrap starts reading.
    for (let off = 0; off < bytes.length;) {
      const n = pwrite(fd, bytes.subarray(off), off);
      if (n <= 0) throw new CtxError(errnoName(-n || 5), "cannot write the sandbox's environment");
      off += n;
    }
    return fd;
  } catch (e) {
    close(fd);
    throw e;
  }
}

/** The argv that runs `spec` (setpriv drops to the agent identity when the launcher is root). */
export function launchArgv(
  spec: SandboxSpec,
  options: {
    dataDir: string;
    layout: HostLayout;
    dieWithParent?: boolean;
    gated?: boolean;
    /** setsid inside (default true); a PTY session passes false to keep its controlling tty. */
    newSession?: boolean;
  },
): {
  argv: string[];
  data: Record<string, string>;
  fds: number[];
  /** The environment's fd ({@link envFd}, one of `fds`): the caller closes it once spawned. */
  envFd: number;
} {
  const p = profile(spec, options);
  const gated = options.gated ?? true;
  const env = envFd(options.dataDir, p.env);
  const fds = [...p.fds, env];
  const argv = ["/bin/bash", "-c", gate(fds, { gated }), "cortexfs-gate"];
  if (Deno.uid() === 0) {
    const groups = spec.groups ?? [];
    argv.push(
      "setpriv",
      `--reuid=${spec.uid}`,
      `--regid=${spec.gid}`,
      groups.length ? `--groups=${groups.join(",")}` : "--clear-groups",
      "--",
    );
  } else if (spec.uid !== Deno.uid()) {
    close(env);
    throw new CtxError(
      "EPERM",
      `cannot run agent uid ${spec.uid} from uid ${Deno.uid()} without root`,
    );
  }
  const { info, block } = gateFds(fds);
  argv.push(
    "bwrap",
    ...p.args,
    "--args", // the --setenv words, right after the profile's --clearenv
    `${env}`,
    ...(gated ? ["--info-fd", `${info}`, "--block-fd", `${block}`] : []),
  );
  argv.push("--", ...p.command);
  return { argv, data: p.data, fds, envFd: env };
}

/** A sandboxed process whose stdio the caller drives (an executable agent's step). */
export interface Sandboxed {
  /** bwrap's process: the leader of its own session and process group (pid == pgid). */
  child: Deno.ChildProcess;
  /** Removes the synthetic passwd/group once the process is gone. */
  cleanup(): void;
}

/**
 * Starts `spec` under bubblewrap in a new session (setsid execs in place: bwrap's pid is the group
 * id), with piped stdin and stdout. No gate: the caller records its receipt of the group before it
 * writes stdin (the process waits for stdin first). bwrap dies with the launching thread, and its
 * sandbox init with bwrap: signalling the group ends bwrap, and with it the whole pid namespace,
 * every child the command started included (also a `setsid` one).
 */
export function spawnSandbox(
  spec: SandboxSpec,
  options: { layout?: HostLayout; stderr?: "null" | "piped" } = {},
): Sandboxed {
  const layout = options.layout ?? (cachedLayout ??= hostLayout());
  const dataDir = Deno.makeTempDirSync({ prefix: "cortexfs-sbx-" });
  const cleanup = () => {
    try {
      Deno.removeSync(dataDir, { recursive: true });
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone */
    }
  };
  try {
    Deno.chmodSync(dataDir, 0o711); // bwrap runs as the agent uid: it reads these files
    const { argv, data, fds, envFd: env } = launchArgv(spec, { dataDir, layout, gated: false });
    try {
      for (const [name, text] of Object.entries(data)) {
        Deno.writeTextFileSync(`${dataDir}/${name}`, text, { mode: 0o444 });
        Deno.chmodSync(`${dataDir}/${name}`, 0o444);
      }
      const command = new Deno.Command(setsidPath(), {
        args: argv,
        clearEnv: true,
        env: { PATH: "/usr/bin:/bin" },
        stdin: "piped",
        stdout: "piped",
        stderr: options.stderr ?? "null",
      });
      return { child: inheriting(fds, () => command.spawn()), cleanup };
    } finally {
      close(env); // bwrap has its copy
    }
  } catch (e) {
    cleanup();
    throw e;
  }
}

/** Where root runs system tools from: absolute paths only, so no PATH entry can stand in. */
const TOOL_DIRS = ["/usr/bin", "/bin"];

/** `name` in {@link TOOL_DIRS} (the first regular file), or undefined. */
export function systemTool(name: string): string | undefined {
  for (const d of TOOL_DIRS) {
    try {
      if (Deno.statSync(`${d}/${name}`).isFile) return `${d}/${name}`;
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory); /* not there */
    }
  }
  return undefined;
}

function setsidPath(): string {
  const p = systemTool("setsid");
  if (p) return p;
  throw new CtxError("ENOSYS", "setsid (util-linux) is not installed");
}

/** Reads a stream keeping at most `limit` bytes; reports whether anything was dropped. */
async function bounded(
  stream: ReadableStream<Uint8Array>,
  limit: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const parts: Uint8Array[] = [];
  let kept = 0, truncated = false;
  for await (const chunk of stream) {
    const room = limit - kept;
    if (chunk.length > room) truncated = true;
    if (room > 0) {
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      parts.push(part);
      kept += part.length;
    }
  }
  return { bytes: concat(parts), truncated };
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Splits bwrap's info JSON (`{...}\n`, always first on stdout: the command is still gated) from the rest. */
function splitInfo(buf: Uint8Array): { info: { "child-pid": number }; rest: Uint8Array } | null {
  const end = new TextDecoder().decode(buf).indexOf("\n}\n");
  if (end < 0) return null;
  const n = end + 3;
  const info = JSON.parse(new TextDecoder().decode(buf.subarray(0, n)));
  if (!Number.isInteger(info?.["child-pid"])) {
    throw new CtxError("EIO", "bwrap info has no child-pid");
  }
  return { info, rest: buf.subarray(n) };
}

/** bwrap started on `spec` with its data files in `dataDir`, the command gated (see {@link launch}). */
async function spawnGated(
  spec: SandboxSpec,
  dataDir: string,
  layout: HostLayout,
  dieWithParent: boolean | undefined,
): Promise<Deno.ChildProcess> {
  const { argv, data, fds, envFd: env } = launchArgv(spec, { dataDir, layout, dieWithParent });
  try {
    for (const [name, text] of Object.entries(data)) {
      await Deno.writeTextFile(`${dataDir}/${name}`, text, { mode: 0o444 });
      await Deno.chmod(`${dataDir}/${name}`, 0o444);
    }
    const command = new Deno.Command(argv[0], {
      args: argv.slice(1),
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    });
    return inheriting(fds, () => command.spawn());
  } finally {
    close(env); // bwrap has its copy
  }
}

/**
 * Kills the sandbox init only: bwrap, its parent, reaps it and then exits, so once child.status
 * resolves the whole namespace is gone (killing bwrap too would orphan the init for a moment).
 * Before the receipt there is no init yet: kills bwrap itself.
 */
function killSandbox(uid: number, child: Deno.ChildProcess, receipt: Receipt | undefined) {
  try {
    // As the sandbox's uid (asSender): the instance holds no CAP_KILL.
    asSender(uid, () => {
      if (receipt) Deno.kill(receipt.pid, "SIGKILL");
      else child.kill("SIGKILL");
    });
  } catch (e) {
    ignore(e, Deno.errors.NotFound, TypeError); // already gone
  }
}

/**
 * Runs `spec.command` in the sandbox. The gate: bwrap reports its init pid on fd 3, the launcher
 * records the pid and its /proc start time (the receipt), and only then writes the one byte on
 * fd 4 that releases the command.
 */
export async function launch(
  spec: SandboxSpec,
  options: LaunchOptions = {},
): Promise<LaunchResult> {
  const limit = options.limit ?? 1 << 20;
  const layout = options.layout ?? (cachedLayout ??= hostLayout());
  const dataDir = await Deno.makeTempDir({ prefix: "cortexfs-sbx-" });
  try {
    // bwrap runs as the agent uid: it must be able to read the synthetic passwd/group.
    await Deno.chmod(dataDir, 0o711);
    const child = await spawnGated(spec, dataDir, layout, options.dieWithParent);
    let receipt: Receipt | undefined;
    const onAbort = () => killSandbox(spec.uid, child, receipt);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    const errP = bounded(child.stderr, limit);
    const writer = child.stdin.getWriter();
    try {
      // One pass over stdout: bwrap's info JSON first (the command is still gated), then the
      // command's own bytes, bounded.
      let head: Uint8Array = new Uint8Array(0);
      const body: Uint8Array[] = [];
      let kept = 0, outTruncated = false;
      for await (const chunk of child.stdout) {
        if (receipt) {
          const room = limit - kept;
          if (chunk.length > room) outTruncated = true;
          if (room > 0) body.push(chunk.subarray(0, room));
          kept += Math.min(room, chunk.length);
          continue;
        }
        head = concat([head, chunk]);
        const s = splitInfo(head);
        if (!s) continue;
        const pid = s.info["child-pid"];
        receipt = { pid, start: startTime(pid), launcher: child.pid, boot: bootId() };
        options.onReceipt?.(receipt);
        if (options.signal?.aborted) onAbort();
        body.push(s.rest.subarray(0, limit));
        kept = Math.min(limit, s.rest.length);
        outTruncated = s.rest.length > limit;
        // The one byte bwrap --block-fd waits for; a command that exits early may close stdin.
        await writer.write(new Uint8Array([0x67])).catch(() => {});
        if (options.stdin?.length) await writer.write(options.stdin).catch(() => {});
        await writer.close().catch(() => {});
      }
      const out = { bytes: concat(body), truncated: outTruncated };
      const [status, err] = await Promise.all([child.status, errP]);
      if (receipt) await reapInit(receipt, { uid: spec.uid });
      if (!receipt) {
        const msg = new TextDecoder().decode(err.bytes).trim();
        throw new CtxError(
          "EIO",
          `bubblewrap could not start the sandbox: ${msg || `exit ${status.code}`}`,
        );
      }
      if (options.signal?.aborted) {
        throw new CtxError("ECANCELED", "sandboxed command cancelled");
      }
      return {
        receipt,
        code: status.signal
          ? 128 + (Deno.build.os === "linux" ? signum(status.signal) : 0)
          : status.code,
        stdout: out.bytes,
        stderr: err.bytes,
        truncated: out.truncated || err.truncated,
      };
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      await writer.close().catch(() => {});
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}

/** How long {@link reapInit} waits for the init's exit before the SIGKILL, and again after it (the defaults). */
export const REAP_BOUND_MS = 1000;

/**
 * How {@link reapInit} ended: nothing matched the receipt (gone already, or its pid now names
 * another process: no signal), the init's exit seen, its exit seen after the SIGKILL, or neither.
 */
export type InitEnd = "gone" | "exited" | "killed" | "late";

/**
 * Waits until the sandbox init of `r` is gone. bwrap's monitor exits as soon as the init reports
 * the command's status on its eventfd, a moment before the init itself exits; the init takes
 * every process of the pid namespace with it, so once it is gone nothing of the run is left.
 * Should it linger past `exitMs`, it is killed, and waited for up to `killMs` (both
 * {@link REAP_BOUND_MS} unless given).
 *
 * The init is not our child (bwrap's monitor is its parent): its exit is waited for as a pidfd
 * turning readable, off the JS thread ({@link waitExits}), the poll's timeout the bound. The
 * pidfd is opened before the receipt is checked ({@link pinProcess}), so it provably names the
 * recorded init, and the SIGKILL goes through it: never to a process that reused the pid. It is
 * closed once no poll on it is left. Without a verified pidfd (EMFILE, or /proc unreadable to
 * check the receipt) the bound alone is waited, and the SIGKILL goes by pid only if the receipt is
 * then seen live; still unreadable then: `late`, nothing signalled. The SIGKILL is sent as
 * `uid` (the sandbox's: asSender).
 */
export async function reapInit(
  r: Receipt,
  options: { exitMs?: number; killMs?: number; uid?: number } = {},
): Promise<InitEnd> {
  const { exitMs = REAP_BOUND_MS, killMs = REAP_BOUND_MS, uid = 0 } = options;
  const fd = pinProcess(r.pid, () => receiptSeen(r));
  if (fd === "stale") return "gone";
  if (fd < 0) {
    await new Promise((ok) => setTimeout(ok, exitMs));
    const now = receiptSeen(r);
    if (now === "gone") return "exited";
    if (now === "unknown") return "late"; // nothing proven: nothing signalled
    try {
      asSender(uid, () => Deno.kill(r.pid, "SIGKILL"));
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone meanwhile */
    }
    return "late";
  }
  try {
    if ((await waitExits([fd], exitMs)).length === 0) return "exited";
    asSender(uid, () => pidfdSignal(fd, SIGKILL)); // ESRCH: it exited meanwhile, and the wait below sees that
    return (await waitExits([fd], killMs)).length === 0 ? "killed" : "late";
  } finally {
    closeFd(fd); // both polls have returned
  }
}

function signum(s: Deno.Signal): number {
  const table: Record<string, number> = {
    SIGHUP: 1,
    SIGINT: 2,
    SIGQUIT: 3,
    SIGKILL: 9,
    SIGSEGV: 11,
    SIGPIPE: 13,
    SIGTERM: 15,
  };
  return table[s] ?? 0;
}
