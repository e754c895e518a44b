/** libc calls on fds and absolute paths as small wrappers: a value or -errno (the symbols: ffi.ts). */
import { AF, ARCH } from "./arch.ts";
import { errno, libc, ret } from "./ffi.ts";
import { POLL, PollFds } from "./poll.ts";

export { errno };

const enc = new TextEncoder();

// The FUSE loop and the store call these on every request: bind the table once, at load.
const sym = libc();
/**
 * A 64-bit parameter as the bigint Deno's FFI types ask for. Passing a plain number also works at
 * run time but takes FFI's slow path: measured at about 0.2 us more per call than `BigInt(n)`,
 * which stays on V8's fast-call path (the allocation is cheaper than the fallback).
 */
const n64 = (n: number) => BigInt(n);
// The lengths below SMALL as BigInts, made once each: a FUSE reply's length is one of a few, and a
// BigInt per write(2) was an allocation per request.
const SMALL = 4096;
const smalls: bigint[] = [];
function small(n: number): bigint {
  return smalls[n] ??= BigInt(n);
}
const scratch = new Uint8Array(3 * 4096 + 1);
/**
 * A NUL-terminated copy of `s` for passing to libc, in a buffer of its own exact size: a view
 * into a larger buffer leaves V8's fast-call path (measured about 0.3 us more per fstatat).
 */
export function cstr(s: string): Uint8Array {
  if (s.length > 4096) return enc.encode(s + "\0");
  const { written } = enc.encodeInto(s, scratch);
  scratch[written] = 0;
  return scratch.slice(0, written + 1);
}

/** Flags of open(2) on this architecture (src/sys/arch.ts). */
export const O = ARCH.O;

const { SOCK } = ARCH;

/** `AT_FDCWD`. */
export const AT_FDCWD = -100;
/** `AT_SYMLINK_NOFOLLOW`. */
export const AT_SYMLINK_NOFOLLOW = 0x100;

/** open(2): an fd or -errno. */
export function open(path: Uint8Array, flags: number, mode = 0): number {
  return ret(sym.open(path, flags | O.CLOEXEC, mode));
}
/** close(2): 0 or -errno. */
export function close(fd: number): number {
  return ret(sym.close(fd));
}
let lastLen = -1;
let lastBig = 0n;
/** read(2) into `buf`: bytes read or -errno. */
export function read(fd: number, buf: Uint8Array): number {
  // the FUSE loop reads into the same 1 MiB buffer every time: convert its size once
  if (buf.length !== lastLen) {
    lastLen = buf.length;
    lastBig = BigInt(lastLen);
  }
  return ret(sym.read(fd, buf, lastBig));
}
/** write(2) of `buf` (its first `len` bytes when given: no view to allocate): bytes written or -errno. */
export function write(fd: number, buf: Uint8Array, len = buf.length): number {
  return ret(sym.write(fd, buf, len < SMALL ? small(len) : n64(len)));
}
/** pread(2) into `buf` at `offset`: bytes read or -errno. */
export function pread(fd: number, buf: Uint8Array, offset: number): number {
  return ret(sym.pread(fd, buf, n64(buf.length), n64(offset)));
}
/** pwrite(2) of `buf` at `offset`: bytes written or -errno. */
export function pwrite(fd: number, buf: Uint8Array, offset: number): number {
  return ret(sym.pwrite(fd, buf, n64(buf.length), n64(offset)));
}

// One set per kind of wait, refilled per call: the FUSE loop polls on every idle wait.
const asyncSet = new PollFds(1);
/** Waits off the JS thread until `fd` is readable (POLLIN) or has hung up; resolves to poll's result. */
export function pollIn(fd: number, timeoutMs = -1): Promise<number> {
  asyncSet.set(0, fd, POLL.IN);
  // errno is meaningless after a nonblocking call (another thread ran it): callers only look at
  // the result and then retry the read, which reports its own errno.
  return sym.poll(asyncSet.buf, asyncSet.count, timeoutMs);
}

const syncSet = new PollFds(1);
/**
 * Waits on this (the JS) thread until `fd` is readable or `timeoutMs` passed: > 0 when readable.
 * Blocks the event loop, so only for short waits.
 */
export function pollInSync(fd: number, timeoutMs: number): number {
  syncSet.set(0, fd, POLL.IN);
  return ret(sym.poll_sync(syncSet.buf, syncSet.count, timeoutMs));
}

/** poll(2) of `set` on this (the JS) thread: the number of ready entries, or -errno. Blocks the event loop. */
export function pollSync(set: PollFds, timeoutMs: number): number {
  return ret(sym.poll_sync(set.buf, set.count, timeoutMs));
}

/**
 * True when the peer of socket `fd` has closed its end entirely (POLLHUP, polled without
 * waiting), as opposed to only its write side (a half-close: EOF to read, but replies still reach
 * it). Unix stream sockets report POLLHUP only then.
 */
export function peerGone(fd: number): boolean {
  syncSet.set(0, fd, 0); // no events asked: POLLHUP and POLLERR are always reported
  const n = sym.poll_sync(syncSet.buf, syncSet.count, 0);
  return n > 0 && (syncSet.revents(0) & (POLL.HUP | POLL.ERR)) !== 0;
}

/** A decoded `struct stat` (this architecture's layout: src/sys/arch.ts). */
export interface Stat {
  dev: number;
  ino: number;
  nlink: number;
  mode: number;
  uid: number;
  gid: number;
  rdev: number;
  size: number;
  blksize: number;
  blocks: number;
  atime: number;
  atimensec: number;
  mtime: number;
  mtimensec: number;
  ctime: number;
  ctimensec: number;
}

const L = ARCH.STAT;
const statBuf = new Uint8Array(L.size);
const statView = new DataView(statBuf.buffer);
function u64(o: number): number {
  return statView.getUint32(o, true) + statView.getUint32(o + 4, true) * 0x1_0000_0000;
}
function i64(o: number): number {
  return statView.getUint32(o, true) + statView.getInt32(o + 4, true) * 0x1_0000_0000;
}
// One Stat object reused by every call: callers copy what they keep before the next call.
const shared: Stat = {
  dev: 0,
  ino: 0,
  nlink: 0,
  mode: 0,
  uid: 0,
  gid: 0,
  rdev: 0,
  size: 0,
  blksize: 0,
  blocks: 0,
  atime: 0,
  atimensec: 0,
  mtime: 0,
  mtimensec: 0,
  ctime: 0,
  ctimensec: 0,
};
function decodeStat(): Stat {
  const s = shared;
  s.dev = u64(L.dev);
  s.ino = u64(L.ino);
  s.nlink = L.nlinkBytes === 8 ? u64(L.nlink) : statView.getUint32(L.nlink, true);
  s.mode = statView.getUint32(L.mode, true);
  s.uid = statView.getUint32(L.uid, true);
  s.gid = statView.getUint32(L.gid, true);
  s.rdev = u64(L.rdev);
  s.size = i64(L.size_);
  s.blksize = statView.getInt32(L.blksize, true); // i64 on x86_64, i32 on aarch64: low word
  s.blocks = i64(L.blocks);
  s.atime = i64(L.atime);
  s.atimensec = u64(L.atime + 8);
  s.mtime = i64(L.mtime);
  s.mtimensec = u64(L.mtime + 8);
  s.ctime = i64(L.ctime);
  s.ctimensec = u64(L.ctime + 8);
  return s;
}

/** lstat(2) (or stat(2) with `follow`): the stat (shared, valid until the next call) or -errno. */
export function lstat(path: Uint8Array, options: { follow?: boolean } = {}): Stat | number {
  return statAt(AT_FDCWD, path, options.follow ? 0 : AT_SYMLINK_NOFOLLOW);
}
/** fstatat(2) with `flags`: the stat (shared, valid until the next call) or -errno. */
export function statAt(dir: number, path: Uint8Array, flags: number): Stat | number {
  return sym.fstatat(dir, path, statBuf, flags) < 0 ? -errno() : decodeStat();
}
/**
 * fstatat(2) with `flags` into the shared stat buffer, not decoded: 0 or -errno. The bytes stay in
 * {@link statBytes} until the next stat call (a caller that copies a few fields or the whole
 * struct skips building numbers it would only write out again).
 */
export function statAtRaw(dir: number, path: Uint8Array, flags: number): number {
  return sym.fstatat(dir, path, statBuf, flags) < 0 ? -errno() : 0;
}
/** The shared stat buffer (read only) and this architecture's `struct stat` offsets. */
export const statBytes: { readonly view: DataView; readonly layout: typeof L } = {
  view: statView,
  layout: L,
};
/** fstat(2): the stat (shared, valid until the next call) or -errno. */
export function fstat(fd: number): Stat | number {
  return sym.fstat(fd, statBuf) < 0 ? -errno() : decodeStat();
}
/** ftruncate(2): 0 or -errno. */
export function ftruncate(fd: number, size: number): number {
  return ret(sym.ftruncate(fd, n64(size)));
}
/** fchown(2): 0 or -errno. */
export function fchown(fd: number, uid: number, gid: number): number {
  return ret(sym.fchown(fd, uid >>> 0, gid >>> 0));
}

/** fallocate(2): 0 or -errno. */
export function fallocate(fd: number, mode: number, offset: number, length: number): number {
  return ret(sym.fallocate(fd, mode, n64(offset), n64(length)));
}

/** `SEEK_DATA` / `SEEK_HOLE` for {@link lseek}. */
export const SEEK = { DATA: 3, HOLE: 4 } as const;
/** lseek(2): the new offset or -errno. */
export function lseek(fd: number, offset: number, whence: number): number {
  const r = Number(sym.lseek(fd, n64(offset), whence));
  return r < 0 ? -errno() : r;
}

/** fremovexattr(2) of `name` (NUL-terminated): 0 or -errno. */
export function fremovexattr(fd: number, name: Uint8Array): number {
  return ret(sym.fremovexattr(fd, name));
}

/** fchmod(2): 0 or -errno. */
export function fchmod(fd: number, mode: number): number {
  return ret(sym.fchmod(fd, mode));
}

const tsBuf = new BigInt64Array(4);
const tsBytes = new Uint8Array(tsBuf.buffer);
/** futimens(3): `[sec, nsec]` pairs (nsec may be UTIME_NOW/UTIME_OMIT); 0 or -errno. */
export function futimens(fd: number, atime: [number, number], mtime: [number, number]): number {
  tsBuf[0] = BigInt(atime[0]);
  tsBuf[1] = BigInt(atime[1]);
  tsBuf[2] = BigInt(mtime[0]);
  tsBuf[3] = BigInt(mtime[1]);
  return ret(sym.futimens(fd, tsBytes));
}

/** fsync(2) / fdatasync(2): 0 or -errno. */
export function fsync(fd: number, options: { data?: boolean } = {}): number {
  return ret(options.data ? sym.fdatasync(fd) : sym.fsync(fd));
}

/**
 * fsync(2) on a worker thread (the JS thread keeps serving): 0, or -5 (EIO) on failure, since
 * errno is thread-local and unreadable after a nonblocking call.
 */
export async function fsyncAsync(fd: number): Promise<number> {
  return (await sym.fsync_async(fd)) < 0 ? -5 : 0;
}

/** mount(2) flags used here. */
export const MS = { NOSUID: 2, NODEV: 4 } as const;
/** mount(2): 0 or -errno. */
export function mount(
  source: string,
  target: string,
  options: { type: string; flags: number; data: string },
): number {
  return ret(
    sym.mount(
      cstr(source),
      cstr(target),
      cstr(options.type),
      n64(options.flags),
      cstr(options.data),
    ),
  );
}
/** umount2 flags. */
export const MNT = { FORCE: 1, DETACH: 2 } as const;
/** umount2(2): 0 or -errno. */
export function umount2(target: string, flags = 0): number {
  return ret(sym.umount2(cstr(target), flags));
}
/**
 * umount2(2) off the JS thread, for a daemon unmounting its own FUSE mount (the kernel may need
 * this thread to answer requests meanwhile); resolves to 0 or a negative number (errno unknown).
 */
export function umount2Async(target: string, flags = 0): Promise<number> {
  return sym.umount2_async(cstr(target), flags);
}
/** umask(2): the previous mask. */
export function umask(mask: number): number {
  return sym.umask(mask);
}
/**
 * unshare(CLONE_FS) for the calling thread: from now on its umask, cwd and root are its own
 * (the other threads keep the process's). 0 or -errno.
 */
export function unshareFs(): number {
  return ret(sym.unshare(0x200)); // CLONE_FS
}

/** Scheduling policies (sched(7)) used here. */
export const SCHED = { OTHER: 0, RR: 2 } as const;
/**
 * sched_setscheduler(2) for the calling thread: `SCHED.RR` at `priority` (1-99) or `SCHED.OTHER`
 * (priority 0). Threads this one creates later inherit it. 0 or -errno.
 */
export function setSched(policy: number, priority = 0): number {
  return ret(sym.sched_setscheduler(0, policy, new Int32Array([priority])));
}
/**
 * Runs `f` (which forks: a spawn) with the calling thread at the ordinary policy, so a child never
 * inherits a real-time one; the thread's policy and priority are restored after.
 */
export function ordinary<T>(f: () => T): T {
  const policy = sym.sched_getscheduler(0);
  if (policy <= SCHED.OTHER) return f();
  const param = new Int32Array(1);
  sym.sched_getparam(0, param);
  sym.sched_setscheduler(0, SCHED.OTHER, new Int32Array([0]));
  try {
    return f();
  } finally {
    sym.sched_setscheduler(0, policy, param);
  }
}

/** fcntl commands used here. */
export const F = {
  DUPFD_CLOEXEC: 1030,
  GETFD: 1,
  SETFD: 2,
  GETFL: 3,
  SETFL: 4,
  FD_CLOEXEC: 1,
} as const;
/** fcntl(2) with an int argument: the result or -errno. */
export function fcntl(fd: number, cmd: number, arg = 0): number {
  return ret(sym.fcntl(fd, cmd, arg));
}

/**
 * socketpair(AF_UNIX, SOCK_STREAM or SOCK_SEQPACKET): two fds, close-on-exec from their first
 * instant with `cloexec` (else neither is), or -errno.
 */
export function socketpair(
  options: { seqpacket?: boolean; cloexec?: boolean } = {},
): [number, number] | number {
  const sv = new Int32Array(2);
  const type = (options.seqpacket ? SOCK.SEQPACKET : SOCK.STREAM) |
    (options.cloexec ? SOCK.CLOEXEC : 0);
  const r = sym.socketpair(AF.UNIX, type, 0, new Uint8Array(sv.buffer));
  return r < 0 ? -errno() : [sv[0], sv[1]];
}

const backingMap = new Uint8Array(16);
const backingView = new DataView(backingMap.buffer);
const backingId = new Uint8Array(4);
const BACKING_OPEN = BigInt(ARCH.IOC.FUSE_BACKING_OPEN);
const BACKING_CLOSE = BigInt(ARCH.IOC.FUSE_BACKING_CLOSE);
/**
 * FUSE_DEV_IOC_BACKING_OPEN on the /dev/fuse fd `dev`: registers the open file `fd` for FUSE
 * passthrough (kernel 6.9+, CAP_SYS_ADMIN); its backing id (> 0) or -errno.
 */
export function fuseBackingOpen(dev: number, fd: number): number {
  backingView.setInt32(0, fd, true); // struct fuse_backing_map { i32 fd; u32 flags; u64 padding }
  backingView.setUint32(4, 0, true);
  backingView.setBigUint64(8, 0n, true);
  return ret(sym.ioctl_ptr(dev, BACKING_OPEN, backingMap));
}
/** FUSE_DEV_IOC_BACKING_CLOSE: drops backing id `id` (files opened with it keep their file); 0 or -errno. */
export function fuseBackingClose(dev: number, id: number): number {
  new DataView(backingId.buffer).setUint32(0, id, true);
  return ret(sym.ioctl_ptr(dev, BACKING_CLOSE, backingId));
}
