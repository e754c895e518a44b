/**
 * The one libc symbol table of CortexFS: every FFI symbol is declared here, once, and the library
 * is opened on first use, only where --allow-ffi is granted (tsh runs without it: it asks
 * {@link ffiGranted} and takes its path-based route). errno is read through
 * `__errno_location()` right after the synchronous call that failed ({@link errno}).
 */
import { CtxError } from "../abi/errno.ts";

// Sized results are declared i32 where the value never reaches 2 GiB (one read or write is at
// most a few MiB): an i32 comes back as a number, an isize as a BigInt that costs an allocation.
// Calls variadic in C (syscall) get one fixed signature per use: glibc's syscall() only moves
// registers, so a fixed signature is sound, and every argument is a full 64-bit register.
const SYMBOLS = {
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
  // pid 0: the calling thread (Linux schedules threads; the policy is per thread)
  sched_setscheduler: { parameters: ["i32", "i32", "buffer"], result: "i32" },
  sched_getscheduler: { parameters: ["i32"], result: "i32" },
  sched_getparam: { parameters: ["i32", "buffer"], result: "i32" },
  unshare: { parameters: ["i32"], result: "i32" },
  // the calling thread's network namespace, for one socket made in another (fdpass.ts)
  setns: { parameters: ["i32", "i32"], result: "i32" },
  socketpair: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  recvmsg: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  sendmsg: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // ioctl(2) with a pointer argument (variadic in C: one fixed signature, as for syscall)
  ioctl_ptr: { name: "ioctl", parameters: ["i32", "u64", "buffer"], result: "i32" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  // the host's listening sockets (listen.ts)
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  listen: { parameters: ["i32", "i32"], result: "i32" },
  accept4: { parameters: ["i32", "pointer", "pointer", "i32"], result: "i32" },
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  // *at(2) calls on one name in a directory fd (dir.ts)
  openat: { parameters: ["i32", "buffer", "i32", "u32"], result: "i32" },
  mkdirat: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  mknodat: { parameters: ["i32", "buffer", "u32", "u64"], result: "i32" },
  unlinkat: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  renameat2: { parameters: ["i32", "buffer", "i32", "buffer", "u32"], result: "i32" },
  symlinkat: { parameters: ["buffer", "i32", "buffer"], result: "i32" },
  readlinkat: { parameters: ["i32", "buffer", "buffer", "usize"], result: "i32" },
  linkat: { parameters: ["i32", "buffer", "i32", "buffer", "i32"], result: "i32" },
  fchmodat: { parameters: ["i32", "buffer", "u32", "i32"], result: "i32" },
  fchownat: { parameters: ["i32", "buffer", "u32", "u32", "i32"], result: "i32" },
  utimensat: { parameters: ["i32", "buffer", "buffer", "i32"], result: "i32" },
  fstatvfs: { parameters: ["i32", "buffer"], result: "i32" },
  getdents64: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  // pseudo-terminals (pty.ts)
  openpty: {
    parameters: ["buffer", "buffer", "buffer", "pointer", "buffer"],
    result: "i32",
  },
  posix_spawn: {
    parameters: ["buffer", "buffer", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  posix_spawnattr_init: { parameters: ["buffer"], result: "i32" },
  posix_spawnattr_destroy: { parameters: ["buffer"], result: "i32" },
  posix_spawnattr_setflags: { parameters: ["buffer", "i16"], result: "i32" },
  posix_spawnattr_setsigmask: { parameters: ["buffer", "buffer"], result: "i32" },
  posix_spawnattr_setsigdefault: { parameters: ["buffer", "buffer"], result: "i32" },
  posix_spawn_file_actions_init: { parameters: ["buffer"], result: "i32" },
  posix_spawn_file_actions_destroy: { parameters: ["buffer"], result: "i32" },
  posix_spawn_file_actions_addopen: {
    parameters: ["buffer", "i32", "buffer", "i32", "u32"],
    result: "i32",
  },
  posix_spawn_file_actions_adddup2: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  posix_spawn_file_actions_addclose: { parameters: ["buffer", "i32"], result: "i32" },
  posix_spawn_file_actions_addclosefrom_np: { parameters: ["buffer", "i32"], result: "i32" },
  posix_spawn_file_actions_addchdir_np: { parameters: ["buffer", "buffer"], result: "i32" },
  sigemptyset: { parameters: ["buffer"], result: "i32" },
  sigfillset: { parameters: ["buffer"], result: "i32" },
  // ioctl is variadic; on x86_64 the third argument is one register, so a fixed pointer sig is sound.
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  // Blocks a worker thread until the child changes state; errno is unreadable afterwards.
  waitpid: { parameters: ["i32", "buffer", "i32"], result: "i32", nonblocking: true },
  // a child's stop or exit through its pidfd (wait.ts): waitid(P_PIDFD, ...) off the JS thread,
  // and on it (WNOHANG, or a wait the caller knows is short)
  waitid: { parameters: ["i32", "u32", "buffer", "i32"], result: "i32", nonblocking: true },
  waitid_sync: { name: "waitid", parameters: ["i32", "u32", "buffer", "i32"], result: "i32" },
  // identity of the calling thread (fsid.ts)
  setfsuid: { parameters: ["u32"], result: "i32" },
  setfsgid: { parameters: ["u32"], result: "i32" },
  getgroups: { parameters: ["i32", "buffer"], result: "i32" },
  // raw system calls (numbers per architecture in arch.ts); results are 0/fd or -1
  sys_setgroups: { name: "syscall", parameters: ["i64", "i64", "buffer"], result: "i64" },
  sys_setresuid: { name: "syscall", parameters: ["i64", "i64", "i64", "i64"], result: "i64" },
  sys_pidfd_open: { name: "syscall", parameters: ["i64", "i64", "i64"], result: "i32" },
  sys_pidfd_send_signal: {
    name: "syscall",
    parameters: ["i64", "i64", "i64", "i64", "i64"],
    result: "i32",
  },
  sys_fchmodat2: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "u32", "i32"],
    result: "i32",
  },
  sys_openat2: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "buffer", "usize"],
    result: "i32",
  },
  sys_setxattrat: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "u32", "buffer", "buffer", "usize"],
    result: "i32",
  },
  sys_getxattrat: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "u32", "buffer", "buffer", "usize"],
    result: "i32",
  },
  sys_listxattrat: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "u32", "buffer", "usize"],
    result: "i32",
  },
  sys_removexattrat: {
    name: "syscall",
    parameters: ["i64", "i32", "buffer", "u32", "buffer"],
    result: "i32",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** The bound symbols. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let symbols: Libc | undefined;
let errnoView: Deno.UnsafePointerView | undefined;
let granted: boolean | undefined;

/** True when this process may call libc (--allow-ffi); without it nothing here is opened. */
export function ffiGranted(): boolean {
  return granted ??= Deno.permissions.querySync({ name: "ffi" }).state === "granted";
}

/** The symbol table, opened on first use (ENOSYS where FFI is not granted). */
export function libc(): Libc {
  if (symbols) return symbols;
  if (!ffiGranted()) throw new CtxError("ENOSYS", "libc through FFI needs --allow-ffi");
  const s = Deno.dlopen("libc.so.6", SYMBOLS).symbols;
  // errno lives at a fixed address per thread (each Worker loads this module for itself).
  const p = s.__errno_location();
  if (p === null) throw new CtxError("EIO", "__errno_location() returned NULL");
  errnoView = new Deno.UnsafePointerView(p);
  return symbols = s;
}

/** The calling thread's errno: read it right after the synchronous call that failed. */
export function errno(): number {
  if (!errnoView) libc();
  return errnoView!.getInt32(0); // set by libc() above
}

/** `r` when non-negative, else -errno: the failure convention of every wrapper in src/sys. */
export function ret(r: number): number {
  return r < 0 ? -errno() : r;
}
