/**
 * The per-architecture facts of the system layer: open(2) flags, socket numbers, system call
 * numbers without a glibc wrapper, and the `struct stat` layout. Linux x86_64 and aarch64 (the architectures Deno
 * ships) are known; on any other the system layer refuses to load, rather than pass one
 * architecture's bits to another's kernel (on arm64 the bit x86_64 uses for O_NOFOLLOW is
 * O_LARGEFILE).
 */
import { CtxError } from "../abi/errno.ts";

/** Everything that differs between the architectures this layer knows. */
export interface ArchFacts {
  /** open(2) flags. */
  O: {
    RDONLY: number;
    WRONLY: number;
    RDWR: number;
    ACCMODE: number;
    CREAT: number;
    EXCL: number;
    NOCTTY: number;
    TRUNC: number;
    APPEND: number;
    NONBLOCK: number;
    DIRECTORY: number;
    NOFOLLOW: number;
    CLOEXEC: number;
    PATH: number;
    /** O_TMPFILE (includes O_DIRECTORY). */
    TMPFILE: number;
  };
  /** socket(2) types and flags (`SOCK_*`; NONBLOCK and CLOEXEC are the O_ bits). */
  SOCK: { STREAM: number; DGRAM: number; SEQPACKET: number; NONBLOCK: number; CLOEXEC: number };
  /** The SOL_SOCKET level and its options (`SO_*`) for getsockopt(2). */
  SO: {
    SOL_SOCKET: number;
    TYPE: number;
    PEERCRED: number;
    ACCEPTCONN: number;
    DOMAIN: number;
    PEERPIDFD: number;
  };
  /** System calls called through syscall(2) (glibc 2.36 has no wrapper, or one that does more). */
  SYS: {
    setgroups: bigint;
    setresuid: bigint;
    pidfd_open: bigint;
    pidfd_send_signal: bigint;
    openat2: bigint;
    fchmodat2: bigint;
    setxattrat: bigint;
    getxattrat: bigint;
    listxattrat: bigint;
    removexattrat: bigint;
  };
  /** ioctl request numbers (their encoding is per architecture: direction, size and type bits). */
  IOC: {
    /** FUSE_DEV_IOC_BACKING_OPEN: `_IOW(229, 1, struct fuse_backing_map)` (16 bytes). */
    FUSE_BACKING_OPEN: number;
    /** FUSE_DEV_IOC_BACKING_CLOSE: `_IOW(229, 2, uint32_t)`. */
    FUSE_BACKING_CLOSE: number;
  };
  /** `struct stat`: its size and the byte offset of each field read; `nlink` is u64 or u32. */
  STAT: {
    size: number;
    dev: number;
    ino: number;
    nlink: number;
    nlinkBytes: 4 | 8;
    mode: number;
    uid: number;
    gid: number;
    rdev: number;
    size_: number;
    blksize: number;
    blocks: number;
    atime: number;
    mtime: number;
    ctime: number;
  };
}

// The generic (asm-generic) values: x86_64 keeps these for the access modes and most flags.
const COMMON = {
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
  CLOEXEC: 0o2000000,
  PATH: 0o10000000,
} as const;

// asm-generic socket numbers: x86_64 and aarch64 both use them (MIPS, SPARC, PowerPC differ).
const GENERIC_SOCK = {
  STREAM: 1,
  DGRAM: 2,
  SEQPACKET: 5,
  NONBLOCK: COMMON.NONBLOCK,
  CLOEXEC: COMMON.CLOEXEC,
} as const;
const GENERIC_SO = {
  SOL_SOCKET: 1,
  TYPE: 3,
  PEERCRED: 17,
  ACCEPTCONN: 30,
  DOMAIN: 39,
  PEERPIDFD: 77,
} as const;

/** Address families (`AF_*`): the same on every architecture. */
export const AF = { UNIX: 1, NETLINK: 16 } as const;
/** The control message that passes fds: the same on every architecture. */
export const SCM_RIGHTS = 1;

// The unified system call table (Linux 5.1+ numbers every new call the same everywhere).
const UNIFIED = {
  pidfd_send_signal: 424n,
  pidfd_open: 434n,
  openat2: 437n,
  fchmodat2: 452n,
  setxattrat: 463n,
  getxattrat: 464n,
  listxattrat: 465n,
  removexattrat: 466n,
} as const;

// asm-generic ioctl encoding (x86_64 and aarch64 both use it): dir << 30 | size << 16 | type << 8 | nr
const IOW = (type: number, nr: number, size: number) =>
  ((1 << 30) | (size << 16) | (type << 8) | nr) >>> 0;
const GENERIC_IOC = {
  FUSE_BACKING_OPEN: IOW(229, 1, 16),
  FUSE_BACKING_CLOSE: IOW(229, 2, 4),
} as const;

const TIMES = { atime: 72, mtime: 88, ctime: 104 } as const; // each tv_sec, tv_nsec 8 bytes later

const KNOWN: Record<string, ArchFacts> = {
  x86_64: {
    O: { ...COMMON, DIRECTORY: 0o200000, NOFOLLOW: 0o400000, TMPFILE: 0o20200000 },
    SOCK: GENERIC_SOCK,
    SO: GENERIC_SO,
    SYS: { ...UNIFIED, setgroups: 116n, setresuid: 117n },
    IOC: GENERIC_IOC,
    STAT: {
      size: 144,
      dev: 0,
      ino: 8,
      nlink: 16,
      nlinkBytes: 8,
      mode: 24,
      uid: 28,
      gid: 32,
      rdev: 40,
      size_: 48,
      blksize: 56,
      blocks: 64,
      ...TIMES,
    },
  },
  aarch64: {
    O: { ...COMMON, DIRECTORY: 0o40000, NOFOLLOW: 0o100000, TMPFILE: 0o20040000 },
    SOCK: GENERIC_SOCK,
    SO: GENERIC_SO,
    SYS: { ...UNIFIED, setgroups: 159n, setresuid: 147n },
    IOC: GENERIC_IOC,
    STAT: {
      size: 128,
      dev: 0,
      ino: 8,
      mode: 16,
      nlink: 20,
      nlinkBytes: 4,
      uid: 24,
      gid: 28,
      rdev: 32,
      size_: 48,
      blksize: 56,
      blocks: 64,
      ...TIMES,
    },
  },
};

/** The facts of the architecture this process runs on; throws ENOTSUP on any other. */
export function archFacts(arch: string = Deno.build.arch): ArchFacts {
  const facts = KNOWN[arch];
  if (!facts) {
    throw new CtxError(
      "ENOTSUP",
      `no system constants for ${arch}: CortexFS's system layer knows ${
        Object.keys(KNOWN).join(" and ")
      }`,
    );
  }
  return facts;
}

/** This machine's facts, resolved once when the system layer loads. */
export const ARCH: ArchFacts = archFacts();
