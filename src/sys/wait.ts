/** A child's stop or exit as an event: pidfd_open(2) and waitid(2) with P_PIDFD, off the JS thread or on it; any process's exit as a readable pidfd. */
import { ARCH } from "./arch.ts";
import { errno, libc } from "./ffi.ts";
import { POLL, PollFds } from "./poll.ts";

const sym = libc();

/** waitid(2) options. */
export const W = {
  NOHANG: 1,
  STOPPED: 2,
  EXITED: 4,
  CONTINUED: 8,
  /** Leave the child waitable: the report stays for whoever reaps it (Deno's own wait4). */
  NOWAIT: 0x0100_0000,
} as const;

const P_PIDFD = 3;
// siginfo_t is 128 bytes; a SIGCHLD report keeps si_code at 8, si_pid at 16 and si_status at 24
// (the generic layout: x86_64 and aarch64 alike).
const SIGINFO_SIZE = 128;
const CODES = ["exited", "killed", "dumped", "trapped", "stopped", "continued"] as const;

/** What waitid reported of a child: how it changed state, and its exit code or signal number. */
export interface ChildReport {
  pid: number;
  /** CLD_EXITED ... CLD_CONTINUED, by name. */
  how: typeof CODES[number];
  /** The exit code (`exited`), else the signal that killed, stopped or continued it. */
  status: number;
}

/**
 * pidfd_open(pid, 0): a pidfd (close-on-exec) that names that one process from now on, however
 * its pid is reused once it is reaped; or -errno (ESRCH when no such process exists).
 */
export function pidfdOpen(pid: number): number {
  const r = sym.sys_pidfd_open(ARCH.SYS.pidfd_open, BigInt(pid), 0n);
  return r < 0 ? -errno() : r;
}

/** The report in `info`; null when there is none (W.NOHANG), -5 (EIO) for a code no child has. */
function decode(info: Uint8Array): ChildReport | null | number {
  const v = new DataView(info.buffer);
  const pid = v.getInt32(16, true);
  if (pid === 0) return null;
  const how = CODES[v.getInt32(8, true) - 1];
  return how ? { pid, how, status: v.getInt32(24, true) } : -5;
}

/**
 * waitid(P_PIDFD, pidfd, ..., options) on a worker thread: resolves to the report once the child
 * behind `pidfd` (ours: waitid only sees our children) changes state as `options` ask, or to a
 * negative number when waitid failed. errno is unreadable after an off-thread call: the failure
 * is ECHILD once the child has been reaped, or EINTR; the caller tells them apart (sock.ts
 * `pidfdAlive`). The pidfd must stay open until this settles (a closed number can be reused under
 * a waitid yet to run). Not with W.NOHANG: use {@link waitChildSync}.
 */
export async function waitChild(pidfd: number, options: number): Promise<ChildReport | number> {
  const info = new Uint8Array(SIGINFO_SIZE); // one per call: waits may overlap
  const r = await sym.waitid(P_PIDFD, pidfd, info, options);
  return r < 0 ? -1 : decode(info) ?? -5; // without W.NOHANG a success always reports
}

/**
 * waitid(P_PIDFD, pidfd, ..., options) on this (the JS) thread: the report, null when W.NOHANG
 * found nothing to report, or -errno. Blocks the event loop unless W.NOHANG is given.
 */
export function waitChildSync(pidfd: number, options: number): ChildReport | null | number {
  const info = new Uint8Array(SIGINFO_SIZE);
  return sym.waitid_sync(P_PIDFD, pidfd, info, options) < 0 ? -errno() : decode(info);
}

/**
 * Waits off the JS thread until the process behind each pidfd has exited, or `timeoutMs` passed
 * (-1: no bound); resolves to the pidfds whose process still runs then (none: every exit seen).
 * A pidfd polls readable once its process has exited (a zombie, or reaped): any process, not only
 * a child of ours as waitid needs. Each poll(2) runs on a thread of Deno's blocking pool over the
 * fds still running, with the time left as its timeout, and returns at an exit or at the bound:
 * no thread is held longer than the processes live or the bound. A failed poll (EINTR; errno is
 * unreadable off-thread) is retried, three times in a row at most, then the wait ends as at the
 * bound. The pidfds must stay open until this settles (a closed number can be reused under a poll
 * yet to run).
 */
export async function waitExits(pidfds: readonly number[], timeoutMs: number): Promise<number[]> {
  let left = [...pidfds];
  const end = timeoutMs < 0 ? Infinity : performance.now() + timeoutMs;
  for (let failed = 0; left.length > 0 && failed < 3;) {
    const ms = end === Infinity ? -1 : Math.max(0, Math.ceil(end - performance.now()));
    const p = PollFds.of(left, POLL.IN); // one per call: waits may overlap
    const r = await sym.poll(p.buf, p.count, ms);
    if (r < 0) {
      failed++;
      continue;
    }
    if (r === 0) break; // the bound
    failed = 0;
    // POLLIN (exited), POLLHUP (reaped too), or POLLNVAL (not an open fd: nothing to wait for)
    left = left.filter((_, i) => p.revents(i) === 0);
  }
  return left;
}
