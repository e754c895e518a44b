/** Listening Unix sockets the host creates but never accepts on, an eventfd, and one poll over many fds (own libc dlopen). */

const AF_UNIX = 1;
const SOCK_STREAM = 1;
const SOCK_NONBLOCK = 0o4000;
const SOCK_CLOEXEC = 0o2000000;
const EFD_NONBLOCK = 0o4000;
const EFD_CLOEXEC = 0o2000000;
const POLLIN = 1;
const F_GETFL = 3;
const F_SETFL = 4;
/** `sizeof(struct sockaddr_un)`; `sun_path` holds 107 bytes and a NUL. */
const SUN_LEN = 110;
/** Listen backlog: connections wait here (never answered by the host) until an instance accepts. */
export const BACKLOG = 128;

type Libc = {
  symbols: {
    socket(domain: number, type: number, protocol: number): number;
    bind(fd: number, addr: Uint8Array, len: number): number;
    listen(fd: number, backlog: number): number;
    accept4(fd: number, addr: null, len: null, flags: number): number;
    fcntl(fd: number, cmd: number, arg: number): number;
    close(fd: number): number;
    eventfd(init: number, flags: number): number;
    read(fd: number, buf: Uint8Array, len: bigint): number;
    write(fd: number, buf: Uint8Array, len: bigint): number;
    poll(fds: Uint8Array, n: bigint, timeout: number): Promise<number>;
    fstat(fd: number, buf: Uint8Array): number;
    __errno_location(): Deno.PointerValue;
  };
};

let lib: Libc | undefined;

function libc(): Libc {
  lib ??= Deno.dlopen("libc.so.6", {
    socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
    bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
    listen: { parameters: ["i32", "i32"], result: "i32" },
    accept4: { parameters: ["i32", "pointer", "pointer", "i32"], result: "i32" },
    fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
    close: { parameters: ["i32"], result: "i32" },
    eventfd: { parameters: ["u32", "i32"], result: "i32" },
    read: { parameters: ["i32", "buffer", "usize"], result: "i32" },
    write: { parameters: ["i32", "buffer", "usize"], result: "i32" },
    // Off the JS thread: the host's one wait for every idle agent socket (errno is meaningless
    // after it; the result is the count of ready fds, or -1 when interrupted).
    poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
    fstat: { parameters: ["i32", "buffer"], result: "i32" },
    __errno_location: { parameters: [], result: "pointer" },
  }) as unknown as Libc;
  return lib;
}

// errno is thread-local: read it right after the failing synchronous call.
function lastErrno(): number {
  const p = libc().symbols.__errno_location();
  return p ? new Deno.UnsafePointerView(p).getInt32() : 0;
}

/**
 * socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC) + bind(path) + listen: the fd, or
 * -errno (the half-made socket closed). The file's mode is the caller's (chmod after). Close-on-exec
 * from its first instant: it reaches a child only where the spawn names it on purpose.
 */
export function listenUnix(path: string): number {
  const s = libc().symbols;
  const bytes = new TextEncoder().encode(path);
  if (bytes.length >= SUN_LEN - 2) return -36; // ENAMETOOLONG
  const addr = new Uint8Array(SUN_LEN);
  new DataView(addr.buffer).setUint16(0, AF_UNIX, true);
  addr.set(bytes, 2);
  const fd = s.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -lastErrno();
  if (s.bind(fd, addr, 2 + bytes.length + 1) !== 0 || s.listen(fd, BACKLOG) !== 0) {
    const n = lastErrno();
    s.close(fd);
    return -n;
  }
  return fd;
}

/**
 * Answers every connection waiting on listening `fd` with `frame` and closes it (nonblocking:
 * returns once the backlog is empty). Only for an agent whose instance could not start: without
 * it the same waiting client would start a failing instance again and again.
 */
export function refuseWaiting(fd: number, frame: Uint8Array): number {
  const s = libc().symbols;
  // An instance's runtime may have made the shared open file description blocking (it is the
  // same socket): nonblocking again, or the last accept would wait for the next client forever.
  const fl = s.fcntl(fd, F_GETFL, 0);
  if (fl < 0 || s.fcntl(fd, F_SETFL, fl | SOCK_NONBLOCK) < 0) return 0;
  let n = 0;
  for (;;) {
    const c = s.accept4(fd, null, null, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return n; // EAGAIN: nobody else waits
    s.write(c, frame, BigInt(frame.length)); // a small frame fits an empty socket buffer
    s.close(c);
    n++;
  }
}

/** close(2): 0 or -errno. */
export function closeFd(fd: number): number {
  return libc().symbols.close(fd) === 0 ? 0 : -lastErrno();
}

/** The inode number of an open fd (tests compare sockets across processes by it), or -errno. */
export function inodeOf(fd: number): number {
  const st = new Uint8Array(144);
  if (libc().symbols.fstat(fd, st) !== 0) return -lastErrno();
  return Number(new DataView(st.buffer).getBigUint64(8, true)); // st_ino on x86_64
}

/** A wake-up fd (eventfd, nonblocking, close-on-exec) that re-arms a {@link pollReadable} wait. */
export class Wake {
  readonly fd: number;
  readonly #one = new Uint8Array(new BigUint64Array([1n]).buffer);
  readonly #drain = new Uint8Array(8);

  constructor() {
    this.fd = libc().symbols.eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (this.fd < 0) throw new Error(`eventfd failed (errno ${lastErrno()})`);
  }

  /** Makes a pending (or the next) wait return at once. */
  ring(): void {
    libc().symbols.write(this.fd, this.#one, 8n);
  }

  /** Consumes every ring so far (nonblocking: nothing to read is fine). */
  drain(): void {
    libc().symbols.read(this.fd, this.#drain, 8n);
  }

  /** Closes the eventfd (only once no wait uses it). */
  close(): void {
    libc().symbols.close(this.fd);
  }
}

/**
 * One poll(2) for readability over `fds` (and `wake.fd`), off the JS thread, with no timeout:
 * resolves to the subset of `fds` that is readable or hung up (empty when only the wake rang).
 * The caller must not close any of these fds until it resolves.
 */
export async function pollReadable(fds: readonly number[], wake: Wake): Promise<number[]> {
  const all = [wake.fd, ...fds];
  const buf = new Uint8Array(8 * all.length);
  const v = new DataView(buf.buffer);
  all.forEach((fd, i) => {
    v.setInt32(8 * i, fd, true);
    v.setInt16(8 * i + 4, POLLIN, true);
  });
  const r = await libc().symbols.poll(buf, BigInt(all.length), -1);
  wake.drain();
  if (r <= 0) return []; // EINTR: the caller polls again
  const out: number[] = [];
  for (let i = 1; i < all.length; i++) {
    if (v.getInt16(8 * i + 6, true) !== 0) out.push(all[i]);
  }
  return out;
}
