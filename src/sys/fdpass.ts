/** Messages with fds over a SOCK_SEQPACKET socketpair (SCM_RIGHTS), fusermount3's /dev/fuse fd, and what a received socket fd is: its kind, its local name, the file it is bound to. */
import { ERRNO } from "../abi/errno.ts";
import { AF, ARCH, SCM_RIGHTS } from "./arch.ts";
import { errno, libc } from "./ffi.ts";
import { fstat, socketpair } from "./libc.ts";

const { SOCK, SO } = ARCH;
const MSG_TRUNC = 0x20;
const MSG_CTRUNC = 0x8;
const MSG_DONTWAIT = 0x40;
const MSG_NOSIGNAL = 0x4000;
const MSG_CMSG_CLOEXEC = 0x40000000;
const S_IFMT = 0o170000;
const S_IFSOCK = 0o140000;
/** Room for this many fds in one message's control data: more than one is refused, not read. */
const MAX_FDS = 4;
/** `CMSG_SPACE(4 * MAX_FDS)` (struct cmsghdr is 16 bytes on 64-bit Linux). */
const CONTROL = 16 + 4 * MAX_FDS;

const addr = (b: Uint8Array) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));

/**
 * socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC): message boundaries kept, both ends
 * close-on-exec from their first instant (a spawn names the child's end on purpose). -errno.
 */
export function seqpacketPair(): [number, number] | number {
  return socketpair({ seqpacket: true, cloexec: true });
}

/** A struct msghdr (56 bytes) over one data buffer and an optional control buffer. */
function msghdr(data: Uint8Array, control: Uint8Array | null): {
  msg: BigUint64Array;
  keep: unknown[];
} {
  const iov = new BigUint64Array([addr(data), BigInt(data.length)]);
  const msg = new BigUint64Array(7); // name, namelen, iov, iovlen, control, controllen, flags
  msg[2] = addr(new Uint8Array(iov.buffer));
  msg[3] = 1n;
  if (control) {
    msg[4] = addr(control);
    msg[5] = BigInt(control.length);
  }
  return { msg, keep: [iov, data, control] };
}

/**
 * sendmsg(2) of one message, with `fd` as SCM_RIGHTS when given, never waiting (MSG_DONTWAIT:
 * EAGAIN when the peer's buffer is full) and never raising SIGPIPE: bytes sent or -errno.
 */
export function sendMsg(sock: number, data: Uint8Array, fd?: number): number {
  let control: Uint8Array | null = null;
  if (fd !== undefined) {
    control = new Uint8Array(24); // CMSG_SPACE(4)
    const v = new DataView(control.buffer);
    v.setBigUint64(0, 20n, true); // CMSG_LEN(4)
    v.setInt32(8, SO.SOL_SOCKET, true);
    v.setInt32(12, SCM_RIGHTS, true);
    v.setInt32(16, fd, true);
  }
  const { msg, keep } = msghdr(data, control);
  let r: number;
  do {
    r = libc().sendmsg(sock, new Uint8Array(msg.buffer), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno() === 4); // EINTR
  void keep; // the buffers the pointers name stay reachable until the call returned
  return r < 0 ? -errno() : r;
}

/** One message received: its bytes, the fds it carried (close-on-exec), whether any was cut. */
export interface Received {
  data: Uint8Array;
  fds: number[];
  /** The message was longer than asked for (MSG_TRUNC), or carried more fds than fit. */
  truncated: boolean;
}

/**
 * recvmsg(2) of one message of at most `max` bytes, never waiting unless `wait`: the message (0
 * bytes and no fd: the peer closed), or -errno (EAGAIN: none yet). Every fd it carried is
 * installed close-on-exec and returned, also when the message is refused: the caller closes them.
 */
export function recvMsg(
  sock: number,
  max: number,
  options: { wait?: boolean } = {},
): Received | number {
  const data = new Uint8Array(max);
  const control = new Uint8Array(CONTROL);
  const { msg, keep } = msghdr(data, control);
  const flags = (options.wait ? 0 : MSG_DONTWAIT) | MSG_CMSG_CLOEXEC;
  let r: number;
  do {
    r = libc().recvmsg(sock, new Uint8Array(msg.buffer), flags);
  } while (r < 0 && errno() === 4); // EINTR
  void keep;
  if (r < 0) return -errno();
  const got = Number(msg[6] & 0xffffffffn);
  const fds: number[] = [];
  const v = new DataView(control.buffer);
  const len = Number(msg[5]);
  // struct cmsghdr: len u64, level i32, type i32, then the data; each one 8-byte aligned.
  for (let at = 0; at + 16 <= len;) {
    const clen = Number(v.getBigUint64(at, true));
    if (clen < 16 || at + clen > len) break;
    if (v.getInt32(at + 8, true) === SO.SOL_SOCKET && v.getInt32(at + 12, true) === SCM_RIGHTS) {
      for (let o = at + 16; o + 4 <= at + clen; o += 4) fds.push(v.getInt32(o, true));
    }
    at += (clen + 7) & ~7;
  }
  return {
    data: data.slice(0, Math.min(r, max)),
    fds,
    truncated: (got & (MSG_TRUNC | MSG_CTRUNC)) !== 0,
  };
}

/**
 * Waits for one message on `sock` (fusermount3's, over _FUSE_COMMFD) and returns the first fd it
 * passed with SCM_RIGHTS, close-on-exec; or -errno, EIO when the peer closed without passing one.
 * Only that fd is wanted: any other is closed, and cut data does not matter.
 */
export function recvFd(sock: number): number {
  const m = recvMsg(sock, 8, { wait: true });
  if (typeof m === "number") return m;
  for (const fd of m.fds.slice(1)) libc().close(fd);
  return m.fds.length > 0 ? m.fds[0] : -ERRNO.EIO;
}

function sockopt(fd: number, name: number): number {
  const buf = new Uint8Array(4);
  const len = new Uint8Array(new Uint32Array([4]).buffer);
  if (libc().getsockopt(fd, SO.SOL_SOCKET, name, buf, len) !== 0) return -errno();
  return new DataView(buf.buffer).getInt32(0, true);
}

/**
 * Why `fd` is not a connected (not listening) AF_UNIX stream socket, or undefined when it is.
 * Asked of the kernel, never of anything the sender of the fd said.
 */
export function notUnixStream(fd: number): string | undefined {
  const st = fstat(fd);
  if (typeof st === "number") return `fstat failed (errno ${-st})`;
  if ((st.mode & S_IFMT) !== S_IFSOCK) return "not a socket";
  const domain = sockopt(fd, SO.DOMAIN);
  if (domain !== AF.UNIX) return `not an AF_UNIX socket (domain ${domain})`;
  const type = sockopt(fd, SO.TYPE);
  if (type !== SOCK.STREAM) return `not a stream socket (type ${type})`;
  const listening = sockopt(fd, SO.ACCEPTCONN);
  if (listening !== 0) return "a listening socket, not a connection";
  return undefined;
}

/** True when `fd` is an AF_UNIX SOCK_SEQPACKET socket (an instance's end of its host's socketpair). */
export function isSeqpacket(fd: number): boolean {
  return sockopt(fd, SO.DOMAIN) === AF.UNIX && sockopt(fd, SO.TYPE) === SOCK.SEQPACKET;
}

/**
 * getsockname(2) of an AF_UNIX socket: its path, `""` when unnamed (a socketpair, an unbound
 * client), `@name` for an abstract one; or -errno.
 */
export function unixName(fd: number): string | number {
  const buf = new Uint8Array(112);
  const len = new Uint8Array(new Uint32Array([buf.length]).buffer);
  if (libc().getsockname(fd, buf, len) !== 0) return -errno();
  const n = new DataView(len.buffer).getUint32(0, true);
  if (n <= 2) return "";
  const path = buf.subarray(2, Math.min(n, buf.length));
  if (path[0] === 0) return `@${new TextDecoder().decode(path.subarray(1))}`;
  const nul = path.indexOf(0);
  return new TextDecoder().decode(nul >= 0 ? path.subarray(0, nul) : path);
}

/** The file an AF_UNIX socket is bound to, as sock_diag names it (inode and device numbers). */
export interface BoundFile {
  ino: number;
  dev: number;
}

const SIOCGSKNS = 0x894cn;
const CLONE_NEWNET = 0x40000000;
const ENOENT = 2;

/** A NETLINK_SOCK_DIAG socket in this thread's network namespace, or -errno. */
function diagSocket(): number {
  const nl = libc().socket(AF.NETLINK, SOCK.DGRAM | SOCK.CLOEXEC | SOCK.NONBLOCK, 4);
  return nl < 0 ? -errno() : nl;
}

/**
 * A NETLINK_SOCK_DIAG socket in the network namespace of socket `fd` (SIOCGSKNS: CAP_NET_ADMIN
 * over it), made after entering that namespace (setns: CAP_SYS_ADMIN) and leaving it again at
 * once, on this thread, synchronously: the namespace stays the netlink socket's, not the
 * thread's. -errno.
 */
function diagSocketIn(fd: number): number {
  const s = libc();
  const ns = s.ioctl_ptr(fd, SIOCGSKNS, new Uint8Array(8));
  if (ns < 0) return -errno();
  const self = s.open(cstrOf("/proc/thread-self/ns/net"), ARCH.O.RDONLY | ARCH.O.CLOEXEC, 0);
  if (self < 0) {
    const n = errno();
    s.close(ns);
    return -n;
  }
  try {
    if (s.setns(ns, CLONE_NEWNET) !== 0) return -errno();
    const nl = diagSocket();
    if (s.setns(self, CLONE_NEWNET) !== 0) {
      // This thread would go on in the client's network namespace: nothing may run after that.
      console.error(
        `cortexfsd: cannot return to this thread's network namespace (errno ${errno()})`,
      );
      Deno.exit(70);
    }
    return nl;
  } finally {
    s.close(self);
    s.close(ns);
  }
}

function cstrOf(text: string): Uint8Array {
  return new TextEncoder().encode(`${text}\0`);
}

/** One UNIX_DIAG_VFS query on netlink socket `nl` for the socket with inode `ino`. */
function askVfs(nl: number, ino: number): BoundFile | null | number {
  const s = libc();
  // struct nlmsghdr (16) + struct unix_diag_req (24)
  const req = new Uint8Array(40);
  const q = new DataView(req.buffer);
  q.setUint32(0, 40, true);
  q.setUint16(4, 20, true); // SOCK_DIAG_BY_FAMILY
  q.setUint16(6, 1, true); // NLM_F_REQUEST
  q.setUint32(8, 1, true); // seq
  q.setUint8(16, AF.UNIX);
  q.setUint32(20, 0xffffffff, true); // every state
  q.setUint32(24, ino >>> 0, true);
  q.setUint32(28, 0x2, true); // UDIAG_SHOW_VFS
  q.setUint32(32, 0xffffffff, true); // no cookie
  q.setUint32(36, 0xffffffff, true);
  if (s.write(nl, req, BigInt(req.length)) !== req.length) return -errno();
  // The kernel answers within the write: the reply is queued by now.
  const out = new Uint8Array(512);
  const n = s.read(nl, out, BigInt(out.length));
  if (n < 0) return -errno();
  if (n < 16) return -5;
  const v = new DataView(out.buffer, 0, n);
  const type = v.getUint16(4, true);
  if (type === 2) return n >= 20 ? v.getInt32(16, true) : -5; // NLMSG_ERROR: -errno
  if (type !== 20 || n < 32 || v.getUint32(20, true) !== (ino >>> 0)) return -5;
  // struct unix_diag_msg (16 bytes at 16), then rtattrs: len u16, type u16, payload.
  const end = Math.min(n, v.getUint32(0, true));
  for (let at = 32; at + 4 <= end;) {
    const alen = v.getUint16(at, true);
    if (alen < 4) break;
    if (v.getUint16(at + 2, true) === 1 && alen >= 12) { // UNIX_DIAG_VFS
      return { ino: v.getUint32(at + 4, true), dev: v.getUint32(at + 8, true) };
    }
    at += (alen + 3) & ~3;
  }
  return null;
}

/**
 * The file the AF_UNIX socket `fd` is bound to, from NETLINK_SOCK_DIAG (UNIX_DIAG_VFS): a
 * socket accepted from a listener shares the listener's bound file, so an accepted connection
 * and its listener answer the same; a socket bound anew (even to the same path, after a rename
 * or unlink) answers another inode. null when it is bound to no file (unnamed, abstract); -errno.
 * sock_diag finds a socket only in its own network namespace, and an accepted connection lives
 * in its client's: one not found in this thread's is asked for in its own ({@link diagSocketIn}).
 */
export function boundFile(fd: number): BoundFile | null | number {
  const st = fstat(fd);
  if (typeof st === "number") return st;
  const ino = st.ino;
  for (const open of [diagSocket, () => diagSocketIn(fd)]) {
    const nl = open();
    if (nl < 0) return nl;
    try {
      const r = askVfs(nl, ino);
      if (r !== -ENOENT) return r;
    } finally {
      libc().close(nl);
    }
  }
  return -ENOENT;
}
