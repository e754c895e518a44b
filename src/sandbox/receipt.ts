/** Launch receipts: which host process is a sandbox's init, proven by its /proc start time. */
import { CtxError, ERRNO } from "../abi/errno.ts";
import { closeFd } from "../sys/sock.ts";
import { pidfdOpen } from "../sys/wait.ts";

/** What the launcher recorded before releasing the sandboxed command. */
export interface Receipt {
  /** Host pid of the sandbox init (bwrap's `child-pid`): killing it ends the whole namespace. */
  pid: number;
  /** Field 22 of `/proc/<pid>/stat` (clock ticks since boot), as text to keep it exact. */
  start: string;
  /** Host pid of the bwrap launcher process. */
  launcher: number;
  /** `/proc/sys/kernel/random/boot_id`: a receipt from an earlier boot proves nothing. */
  boot: string;
}

/** The start time (field 22) of a process, parsed after the last `)` because comm may hold spaces. */
export function startTime(pid: number): string {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch (e) {
    throw new CtxError("ESRCH", `process ${pid} has no /proc entry`, { cause: e });
  }
  return startOf(pid, text);
}

/**
 * {@link startTime} without blocking the event loop: reading `/proc/<pid>/stat` of a process that
 * is still inside execve waits for the exec to finish (about a millisecond here).
 */
export async function startTimeAsync(pid: number): Promise<string> {
  let text: string;
  try {
    text = await Deno.readTextFile(`/proc/${pid}/stat`);
  } catch (e) {
    throw new CtxError("ESRCH", `process ${pid} has no /proc entry`, { cause: e });
  }
  return startOf(pid, text);
}

function startOf(pid: number, text: string): string {
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state), so field 22 is rest[19].
  const v = rest[19];
  if (!v || !/^\d+$/.test(v)) throw new CtxError("EIO", `cannot parse /proc/${pid}/stat`);
  return v;
}

/** The kernel's boot id. */
export function bootId(): string {
  return Deno.readTextFileSync("/proc/sys/kernel/random/boot_id").trim();
}

/** The state letter (field 3) of a process: R, S, D, Z (zombie), ... */
export function procState(pid: number): string {
  const text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[0];
}

/** The real uid of a process (`Uid:` of `/proc/<pid>/status`, its first field). */
export function procUid(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^Uid:\s+(\d+)/m);
  if (!m) throw new Error(`/proc/${pid}/status has no Uid line`);
  return Number(m[1]);
}

/**
 * What a check of a recorded process found: that process (`live`: same boot, same start time, not
 * a zombie), not it (`gone`: exited, reaped, a zombie, its pid reused, another boot), or no answer
 * (`unknown`: /proc could not be read, as under fd exhaustion, EMFILE). An unknown is never taken
 * for gone: nothing is signalled on it and no receipt is dropped for it.
 */
export type Seen = "live" | "gone" | "unknown";

/** Whether a failed read of /proc/<pid>/... says the process is gone (ENOENT, ESRCH), not that /proc is unreadable. */
function goneError(e: unknown): boolean {
  const cause = e instanceof CtxError && e.errno === "ESRCH" ? e.cause : e;
  const code = (cause as { code?: unknown } | null)?.code;
  return code === "ENOENT" || code === "ESRCH";
}

/** The boot id, read once (it cannot change while this process lives). */
let thisBoot: string | undefined;

/** {@link Seen} of process `pid` against a recorded start time and boot id. */
export function seen(pid: number, start: string, boot: string): Seen {
  try {
    if ((thisBoot ??= bootId()) !== boot) return "gone";
    return startTime(pid) === start && !"ZX".includes(procState(pid)) ? "live" : "gone";
  } catch (e) {
    return goneError(e) ? "gone" : "unknown";
  }
}

/** {@link Seen} of a launch receipt's init. */
export function receiptSeen(r: Receipt): Seen {
  return seen(r.pid, r.start, r.boot);
}

/** True when the receipt's process still runs (not a zombie) with the same start time on this boot. */
export function receiptLive(r: Receipt): boolean {
  return receiptSeen(r) === "live";
}

/**
 * A pidfd for the process a receipt records, opened first and verified after: a pidfd names the
 * process that held `pid` at its open, and that process keeps the pid until it is reaped, so
 * `check()` (the caller's check of the receipt: pid and /proc start time) seeing it live after the
 * open proves the pidfd is the recorded process's, never a later one's that reused the pid (the
 * recorded process started before the open). `stale` when the process is gone or the receipt no
 * longer matches (the fd is closed again); a negative errno when no verified pidfd could be had:
 * the open's (EMFILE), or EIO when the check could not read /proc (the fd is closed again). A
 * caller with a negative answer checks again before any signal, and signals only on `live`. The
 * caller closes the fd.
 */
export function pinProcess(pid: number, check: () => Seen): number | "stale" {
  const fd = pidfdOpen(pid);
  if (fd === -ERRNO.ESRCH) return "stale";
  const s = check();
  if (s !== "live" && fd >= 0) closeFd(fd);
  if (s === "gone") return "stale";
  return s === "live" ? fd : fd < 0 ? fd : -ERRNO.EIO;
}
