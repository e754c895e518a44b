/** The libc symbols CortexFS calls through FFI, with errno captured right after each synchronous call. */

const enc = new TextEncoder();

// Byte counts here never reach 2 GiB (reads and writes are at most 1 MiB + 64 KiB), so sized results
// are declared i32: an i32 comes back as a number, an isize as a BigInt that costs an allocation.
const lib = Deno.dlopen("libc.so.6", {
  __errno_location: { parameters: [], result: "pointer" },
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  write: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  pread: { parameters: ["i32", "buffer", "usize", "i64"], result: "i32" },
  pwrite: { parameters: ["i32", "buffer", "usize", "i64"], result: "i32" },
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  poll_sync: { name: "poll", parameters: ["buffer", "u64", "i32"], result: "i32" },
  fstatat: { parameters: ["i32", "buffer", "buffer", "i32"], result: "i32" },
  fstat: { parameters: ["i32", "buffer"], result: "i32" },
  ftruncate: { parameters: ["i32", "i64"], result: "i32" },
  fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
  fchmod: { parameters: ["i32", "u32"], result: "i32" },
  fremovexattr: { parameters: ["i32", "buffer"], result: "i32" },
  fallocate: { parameters: ["i32", "i32", "i64", "i64"], result: "i32" },
  lseek: { parameters: ["i32", "i64", "i32"], result: "i64" },
  futimens: { parameters: ["i32", "buffer"], result: "i32" },
  fsync: { parameters: ["i32"], result: "i32" },
  fsync_async: { name: "fsync", parameters: ["i32"], result: "i32", nonblocking: true },
  fdatasync: { parameters: ["i32"], result: "i32" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "buffer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  umount2_async: {
    name: "umount2",
    parameters: ["buffer", "i32"],
    result: "i32",
    nonblocking: true,
  },
  umask: { parameters: ["u32"], result: "u32" },
  unshare: { parameters: ["i32"], result: "i32" },
  socketpair: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  recvmsg: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
});

const sym = lib.symbols;
/**
 * A 64-bit parameter as the bigint Deno's FFI types ask for. Passing a plain number also works at
 * run time but takes FFI's slow path: measured at about 0.2 us more per call than `BigInt(n)`,
 * which stays on V8's fast-call path (the allocation is cheaper than the fallback).
 */
const n64 = (n: number) => BigInt(n);
/** Sizes used on every request, converted once. */
const ONE = 1n;
const errnoPtr = sym.__errno_location();
// errno lives at a fixed address per thread; every synchronous call runs on this (the JS) thread.
const errnoView = new Deno.UnsafePointerView(errnoPtr ?? Deno.UnsafePointer.create(0n)!);

/** The calling thread's errno; read it right after the synchronous call that failed. */
export function errno(): number {
  return errnoView.getInt32(0);
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

/** `r` when non-negative, else -errno: the one failure convention of this module. */
function ret(r: number): number {
  return r < 0 ? -errno() : r;
}

/** Flags of open(2) on Linux x86_64. */
export const O = {
  RDONLY: 0,
  WRONLY: 1,
  RDWR: 2,
  ACCMODE: 3,
  CREAT: 0o100,
  EXCL: 0o200,
  NOCTTY: 0o400,
  TRUNC: 0o1000,
  APPEND: 0o2000,
  NONBLOCK: 0o4000,
  DIRECTORY: 0o200000,
  NOFOLLOW: 0o400000,
  CLOEXEC: 0o2000000,
  PATH: 0o10000000,
  /** O_TMPFILE (includes O_DIRECTORY). */
  TMPFILE: 0o20200000,
} as const;

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
  return ret(sym.write(fd, buf, n64(len)));
}
/** pread(2) into `buf` at `offset`: bytes read or -errno. */
export function pread(fd: number, buf: Uint8Array, offset: number): number {
  return ret(sym.pread(fd, buf, n64(buf.length), n64(offset)));
}
/** pwrite(2) of `buf` at `offset`: bytes written or -errno. */
export function pwrite(fd: number, buf: Uint8Array, offset: number): number {
  return ret(sym.pwrite(fd, buf, n64(buf.length), n64(offset)));
}

const pollBuf = new Uint8Array(8);
const pollView = new DataView(pollBuf.buffer);
/** Waits off the JS thread until `fd` is readable (POLLIN) or has hung up; resolves to poll's result. */
export function pollIn(fd: number, timeoutMs = -1): Promise<number> {
  pollView.setInt32(0, fd, true);
  pollView.setInt16(4, 1, true); // POLLIN
  pollView.setInt16(6, 0, true);
  // errno is meaningless after a nonblocking call (another thread ran it): callers only look at
  // the result and then retry the read, which reports its own errno.
  return sym.poll(pollBuf, ONE, timeoutMs);
}

const syncPollBuf = new Uint8Array(8);
const syncPollView = new DataView(syncPollBuf.buffer);
/**
 * Waits on this (the JS) thread until `fd` is readable or `timeoutMs` passed: > 0 when readable.
 * Blocks the event loop, so only for short waits.
 */
export function pollInSync(fd: number, timeoutMs: number): number {
  syncPollView.setInt32(0, fd, true);
  syncPollView.setInt16(4, 1, true); // POLLIN
  syncPollView.setInt16(6, 0, true);
  return ret(sym.poll_sync(syncPollBuf, ONE, timeoutMs));
}

/**
 * True when the peer of socket `fd` has closed its end entirely (POLLHUP, polled without
 * waiting), as opposed to only its write side (a half-close: EOF to read, but replies still reach
 * it). Unix stream sockets report POLLHUP only then.
 */
export function peerGone(fd: number): boolean {
  syncPollView.setInt32(0, fd, true);
  syncPollView.setInt16(4, 0, true); // no events asked: POLLHUP and POLLERR are always reported
  syncPollView.setInt16(6, 0, true);
  const n = sym.poll_sync(syncPollBuf, ONE, 0);
  return n > 0 && (syncPollView.getInt16(6, true) & 0x18) !== 0; // POLLHUP | POLLERR
}

/** A decoded `struct stat` (x86_64 layout, 144 bytes). */
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

const statBuf = new Uint8Array(144);
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
  s.dev = u64(0);
  s.ino = u64(8);
  s.nlink = u64(16);
  s.mode = statView.getUint32(24, true);
  s.uid = statView.getUint32(28, true);
  s.gid = statView.getUint32(32, true);
  s.rdev = u64(40);
  s.size = i64(48);
  s.blksize = i64(56);
  s.blocks = i64(64);
  s.atime = i64(72);
  s.atimensec = u64(80);
  s.mtime = i64(88);
  s.mtimensec = u64(96);
  s.ctime = i64(104);
  s.ctimensec = u64(112);
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

/** socketpair(AF_UNIX, SOCK_STREAM or SOCK_SEQPACKET): two fds (neither close-on-exec) or -errno. */
export function socketpair(options: { seqpacket?: boolean } = {}): [number, number] | number {
  const sv = new Int32Array(2);
  const r = sym.socketpair(1, options.seqpacket ? 5 : 1, 0, new Uint8Array(sv.buffer));
  return r < 0 ? -errno() : [sv[0], sv[1]];
}

/** Receives one message on `sock` and returns the first fd passed with SCM_RIGHTS, or -errno. */
export function recvFd(sock: number): number {
  const data = new Uint8Array(8);
  const iov = new BigUint64Array(2);
  iov[0] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(data)));
  iov[1] = BigInt(data.length);
  const control = new Uint8Array(64);
  // struct msghdr (56 bytes): name, namelen, iov, iovlen, control, controllen, flags
  const msg = new BigUint64Array(7);
  msg[2] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(iov)));
  msg[3] = 1n;
  msg[4] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(control)));
  msg[5] = BigInt(control.length);
  let r: number;
  do {
    r = sym.recvmsg(sock, new Uint8Array(msg.buffer), 0);
  } while (r < 0 && errno() === 4); // EINTR
  if (r < 0) return -errno();
  const cv = new DataView(control.buffer);
  const controllen = Number(msg[5]);
  // struct cmsghdr: len u64, level i32, type i32, data (SOL_SOCKET=1, SCM_RIGHTS=1)
  if (controllen < 20 || cv.getInt32(8, true) !== 1 || cv.getInt32(12, true) !== 1) {
    return -5; // EIO: the peer closed without passing an fd
  }
  return cv.getInt32(16, true);
}
