/** Socket calls Deno lacks: SO_PEERCRED, SO_PEERPIDFD, pidfd liveness and signals, FD_CLOEXEC. */
import { CtxError, errnoName } from "../abi/errno.ts";
import { ARCH } from "./arch.ts";
import { errno, libc } from "./ffi.ts";

const { SO } = ARCH;
const F_GETFD = 1;
const F_SETFD = 2;
const FD_CLOEXEC = 1;

/** The kernel-verified credentials of a Unix socket peer. */
export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

/** Reads SO_PEERCRED of a connected Unix socket fd; the kernel fills it at connect time. */
export function peerCred(fd: number): PeerCred {
  const buf = new Uint8Array(12);
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, 12, true);
  if (libc().getsockopt(fd, SO.SOL_SOCKET, SO.PEERCRED, buf, len) !== 0) {
    const n = errno();
    throw new CtxError(errnoName(n), `getsockopt(SO_PEERCRED) failed on fd ${fd} (errno ${n})`);
  }
  const v = new DataView(buf.buffer);
  return { pid: v.getInt32(0, true), uid: v.getUint32(4, true), gid: v.getUint32(8, true) };
}

/**
 * Reads SO_PEERPIDFD of a connected Unix socket fd: a pidfd (close-on-exec) for the process that
 * connected, pinned at connect time so a reused pid can never stand in for it; or -errno (ESRCH
 * when that process is already reaped). The caller closes it with {@link closeFd}.
 */
export function peerPidfd(fd: number): number {
  const buf = new Uint8Array(4);
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, 4, true);
  if (libc().getsockopt(fd, SO.SOL_SOCKET, SO.PEERPIDFD, buf, len) !== 0) return -errno();
  return new DataView(buf.buffer).getInt32(0, true);
}

/**
 * pidfd_send_signal(pidfd, 0, NULL, 0): 0 while the pidfd's process exists (a zombie too: its pid
 * is not reusable until it is reaped), else -errno (ESRCH once it is gone). Sends nothing.
 */
export function pidfdAlive(pidfd: number): number {
  return pidfdSignal(pidfd, 0);
}

/**
 * pidfd_send_signal(pidfd, sig, NULL, 0): sends signal number `sig` to the pidfd's process, and
 * never to one that reused its pid; 0 or -errno (ESRCH once it is gone).
 */
export function pidfdSignal(pidfd: number, sig: number): number {
  const r = libc().sys_pidfd_send_signal(
    ARCH.SYS.pidfd_send_signal,
    BigInt(pidfd),
    BigInt(sig),
    0n,
    0n,
  );
  return r === 0 ? 0 : -errno();
}

/** close(2): 0 or -errno. */
export function closeFd(fd: number): number {
  return libc().close(fd) === 0 ? 0 : -errno();
}

/** Sets FD_CLOEXEC so the fd (e.g. a listener) never leaks into spawned processes. */
export function setCloexec(fd: number): void {
  const s = libc();
  const cur = s.fcntl(fd, F_GETFD, 0);
  if (cur < 0 || s.fcntl(fd, F_SETFD, cur | FD_CLOEXEC) !== 0) {
    const n = errno();
    throw new CtxError(errnoName(n), `fcntl(FD_CLOEXEC) failed on fd ${fd} (errno ${n})`);
  }
}

/** True when FD_CLOEXEC is set on `fd` (tests and diagnostics). */
export function isCloexec(fd: number): boolean {
  const cur = libc().fcntl(fd, F_GETFD, 0);
  if (cur < 0) throw new CtxError(errnoName(errno()), `fcntl(F_GETFD) failed on fd ${fd}`);
  return (cur & FD_CLOEXEC) !== 0;
}

/** The fd behind a node:net socket or server (undocumented `_handle.fd`, pinned Deno 2.9.6). */
export function fdOf(handleOwner: unknown): number {
  const fd = (handleOwner as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) {
    throw new CtxError("ENOTSUP", "this Deno build exposes no fd on node:net handles");
  }
  return fd;
}
