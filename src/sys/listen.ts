/** Listening Unix sockets the host creates (and accepts on only while no instance serves them), an eventfd, and one poll over many fds. */
import { ERRNO } from "../abi/errno.ts";
import { AF, ARCH } from "./arch.ts";
import { errno, libc } from "./ffi.ts";
import { F, fstat } from "./libc.ts";
import { POLL, PollFds } from "./poll.ts";

// close(2) of sock.ts: the callers of this module close what it gives them.
export { closeFd } from "./sock.ts";

const { SOCK } = ARCH;
// EFD_* take the O_* values of the architecture.
const EFD_NONBLOCK = ARCH.O.NONBLOCK;
const EFD_CLOEXEC = ARCH.O.CLOEXEC;
/** `sizeof(struct sockaddr_un)`; `sun_path` holds 107 bytes and a NUL. */
const SUN_LEN = 110;
/** Listen backlog: connections wait here until the host (an idle agent) or its instance accepts. */
export const BACKLOG = 128;

/**
 * socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC) + bind(path) + listen: the fd, or
 * -errno (the half-made socket closed). The file's mode is the caller's (chmod after). Close-on-exec
 * from its first instant: it reaches a child only where the spawn names it on purpose.
 */
export function listenUnix(path: string): number {
  const s = libc();
  const u = unixSocket(path);
  if (typeof u === "number") return u;
  const { fd, addr } = u;
  if (s.bind(fd, addr, addr.length) !== 0 || s.listen(fd, BACKLOG) !== 0) {
    const n = errno();
    s.close(fd);
    return -n;
  }
  return fd;
}

/**
 * Whether a listener answers at `path`: a nonblocking connect(2) on this thread, closed at once
 * (nothing is written). 0 when one accepted or its backlog is full (EAGAIN: a listener is there
 * all the same), else -errno. Synchronous, so it runs under the thread's filesystem identity: the
 * path lookup and the socket's write permission are checked as whoever `asUser` made the thread,
 * which is how root probes a path a user chose without reaching a socket only root could.
 */
export function answersUnix(path: string): number {
  const s = libc();
  const u = unixSocket(path);
  if (typeof u === "number") return u;
  const { fd, addr } = u;
  const r = s.connect(fd, addr, addr.length) === 0 ? 0 : -errno();
  s.close(fd);
  return r === -ERRNO.EAGAIN ? 0 : r;
}

/** A new AF_UNIX stream socket (nonblocking, close-on-exec) with the address of `path`, or -errno. */
function unixSocket(path: string): { fd: number; addr: Uint8Array } | number {
  const addr = sockaddr(path);
  if (!addr) return -ERRNO.ENAMETOOLONG;
  const fd = libc().socket(AF.UNIX, SOCK.STREAM | SOCK.NONBLOCK | SOCK.CLOEXEC, 0);
  return fd < 0 ? -errno() : { fd, addr };
}

/** `struct sockaddr_un` for `path` with its length (NUL included), or null when it does not fit. */
function sockaddr(path: string): Uint8Array | null {
  const bytes = new TextEncoder().encode(path);
  if (bytes.length >= SUN_LEN - 2) return null;
  const addr = new Uint8Array(2 + bytes.length + 1);
  new DataView(addr.buffer).setUint16(0, AF.UNIX, true);
  addr.set(bytes, 2);
  return addr;
}

/**
 * Answers every connection waiting on listening `fd` with `frame` and closes it (nonblocking:
 * returns once the backlog is empty). Only for an agent whose instance could not start: without
 * it the same waiting client would start a failing instance again and again.
 */
export function refuseWaiting(fd: number, frame: Uint8Array): number {
  let n = 0;
  for (;;) {
    const c = acceptWaiting(fd);
    if (c < 0) return n; // EAGAIN: nobody else waits
    answerClose(c, frame);
    n++;
  }
}

/**
 * Takes one connection waiting on listening `fd` without waiting for one: its fd (nonblocking,
 * close-on-exec), or -errno (EAGAIN: none waits).
 */
export function acceptWaiting(fd: number): number {
  const s = libc();
  // An instance's runtime may have made the shared open file description blocking (it is the
  // same socket): nonblocking again, or an accept would wait for the next client forever.
  const fl = s.fcntl(fd, F.GETFL, 0);
  if (fl < 0) return -errno();
  if ((fl & ARCH.O.NONBLOCK) === 0 && s.fcntl(fd, F.SETFL, fl | ARCH.O.NONBLOCK) < 0) {
    return -errno();
  }
  const c = s.accept4(fd, null, null, SOCK.NONBLOCK | SOCK.CLOEXEC);
  return c < 0 ? -errno() : c;
}

/**
 * Writes `frame` to connection `c` without waiting (a small frame fits a new connection's empty
 * buffer) and closes it: nothing is read from the peer, nothing waits on it.
 */
export function answerClose(c: number, frame: Uint8Array): void {
  const s = libc();
  s.write(c, frame, BigInt(frame.length));
  s.close(c);
}

/** The inode number of an open fd (tests compare sockets across processes by it), or -errno. */
export function inodeOf(fd: number): number {
  const st = fstat(fd);
  return typeof st === "number" ? st : st.ino;
}

/** A wake-up fd (eventfd, nonblocking, close-on-exec) that re-arms a {@link pollReadable} wait. */
export class Wake {
  readonly fd: number;
  readonly #one = new Uint8Array(new BigUint64Array([1n]).buffer);
  readonly #drain = new Uint8Array(8);

  constructor() {
    this.fd = libc().eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (this.fd < 0) throw new Error(`eventfd failed (errno ${errno()})`);
  }

  /** Makes a pending (or the next) wait return at once. */
  ring(): void {
    libc().write(this.fd, this.#one, 8n);
  }

  /** Consumes every ring so far (nonblocking: nothing to read is fine). */
  drain(): void {
    libc().read(this.fd, this.#drain, 8n);
  }

  /** Closes the eventfd (only once no wait uses it). */
  close(): void {
    libc().close(this.fd);
  }
}

/**
 * One poll(2) for readability over `fds` (and `wake.fd`), off the JS thread, with no timeout:
 * resolves to the subset of `fds` that is readable or hung up (empty when only the wake rang).
 * The caller must not close any of these fds until it resolves.
 */
export async function pollReadable(fds: readonly number[], wake: Wake): Promise<number[]> {
  const p = PollFds.of([wake.fd, ...fds], POLL.IN);
  const r = await libc().poll(p.buf, p.count, -1);
  wake.drain();
  if (r <= 0) return []; // EINTR: the caller polls again
  return fds.filter((_, i) => p.revents(i + 1) !== 0);
}
