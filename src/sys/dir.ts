/** A directory fd and the *at(2) calls on names in it: the backing tree of a mount, never walked through a symlink. */
import { ARCH } from "./arch.ts";
import { libc, ret } from "./ffi.ts";
import { close, errno, fstat, O, open, type Stat, statAt, statAtRaw } from "./libc.ts";

// Relative walks are the point: a stat of `home/0/d/f` from the generation's fd walks 4 components,
// the absolute path under /var/lib/cortexfs/storage/generations/<g>/ about 10; measured 0.70 us
// against 1.43 us per lstat over 10,000 files, the largest single cost of a LOOKUP or GETATTR.
// Walking a whole relative path with fstatat would follow a symlink in any component, so callers
// hold directory fds from `beneath()` (cached in src/fuse/backing.ts) and name one component.
const sym = libc();
const NOFOLLOW = 0x100; // AT_SYMLINK_NOFOLLOW
const REMOVEDIR = 0x200; // AT_REMOVEDIR
const SYMLINK_FOLLOW = 0x400; // AT_SYMLINK_FOLLOW
const AT_FDCWD = -100;
// openat2(2) and the *xattrat(2) calls (Linux 6.13) have no glibc 2.36 wrapper: raw system calls.
const SYS = ARCH.SYS;
const ENOSYS = 38;
/** Whether the kernel has fchmodat2 (until a call says ENOSYS). */
let hasFchmodat2 = true;
/** XATTR_SIZE_MAX and XATTR_LIST_MAX (linux/limits.h): no value or list is longer. */
export const XATTR_MAX = 65536;
/** RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH (linux/openat2.h). */
const RESOLVE = 0x02n | 0x04n | 0x08n;
// struct open_how { u64 flags; u64 mode; u64 resolve; }: the same request every time.
const how = new BigUint64Array([BigInt(O.PATH | O.DIRECTORY | O.CLOEXEC), 0n, RESOLVE]);
const howBytes = new Uint8Array(how.buffer);
const HOW_SIZE = BigInt(howBytes.length);

/**
 * A name in an open directory: what every backing call takes. `fd` is a directory reached without
 * following any symlink (see {@link Dir.beneath}); `name` is one NUL-terminated component (or `.`).
 */
export interface At {
  fd: number;
  name: Uint8Array;
}

/** `UTIME_NOW` / `UTIME_OMIT` for {@link Dir.utimens}. */
export const UTIME = { NOW: (1 << 30) - 1, OMIT: (1 << 30) - 2 } as const;

/** A decoded `struct statvfs`. */
export interface StatVfs {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  namemax: number;
}

/** One directory entry from {@link Dir.list}: the raw name bytes, DT_* type and inode number. */
export interface Dirent {
  name: Uint8Array;
  type: number;
  ino: number;
}

/** The bytes the last {@link Dir.getxattr} / {@link Dir.listxattr} read (valid until the next call). */
export const xattrBuf = new Uint8Array(XATTR_MAX);
// struct xattr_args { u64 value; u32 size; u32 flags; } (XATTR_ARGS_SIZE_VER0: 16 bytes)
const xargs = new BigUint64Array(2);
const xargsBytes = new Uint8Array(xargs.buffer);
const xargsView = new DataView(xargs.buffer);
const XARGS_SIZE = 16n;
const XATTR_BUF_ADDR = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(xattrBuf)));
const XATTR_MAX_N = BigInt(XATTR_MAX);
const linkBuf = new Uint8Array(4097);
const tsBuf = new Uint8Array(32);
const tsView = new DataView(tsBuf.buffer);
const vfsBuf = new Uint8Array(112);
const vfsView = new DataView(vfsBuf.buffer);
const dentBuf = new Uint8Array(64 * 1024);
const dentView = new DataView(dentBuf.buffer);
const DENT_SIZE = BigInt(dentBuf.length);
const LINK_SIZE = BigInt(linkBuf.length);

/**
 * An open directory and the calls on names in it. Nothing here follows a symlink: directories
 * below this one are reached with {@link Dir.beneath} (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and every call on a final name uses
 * AT_SYMLINK_NOFOLLOW / O_NOFOLLOW (or acts on the link itself: unlink, rename, readlink).
 */
export class Dir {
  /** The directory's fd (close-on-exec). */
  readonly fd: number;

  /** Opens `path` (absolute) as a directory; throws when it cannot. */
  constructor(path: string) {
    const enc = new TextEncoder();
    const fd = open(enc.encode(path + "\0"), O.RDONLY | O.DIRECTORY);
    if (fd < 0) throw new Error(`cannot open directory ${path}: errno ${-fd}`);
    this.fd = fd;
  }

  /**
   * Opens the directory `path` (relative, NUL-terminated; several components) below this one as an
   * O_PATH fd, or -errno: ELOOP when any component is a symlink, EXDEV when `..` would climb out.
   * The caller closes it.
   */
  beneath(path: Uint8Array): number {
    return ret(sym.sys_openat2(SYS.openat2, this.fd, path, howBytes, HOW_SIZE));
  }

  /** fstatat(2) of the name itself (AT_SYMLINK_NOFOLLOW): the shared Stat or -errno. */
  lstat(at: At): Stat | number {
    return statAt(at.fd, at.name, NOFOLLOW);
  }
  /** {@link lstat} of `name` in directory `fd`, for a caller without an {@link At} at hand. */
  lstatIn(fd: number, name: Uint8Array): Stat | number {
    return statAt(fd, name, NOFOLLOW);
  }
  /** {@link lstatIn} left undecoded in libc's `statBytes`: 0 or -errno. */
  lstatRawIn(fd: number, name: Uint8Array): number {
    return statAtRaw(fd, name, NOFOLLOW);
  }
  /** openat(2) with O_NOFOLLOW (a final symlink fails ELOOP): an fd (close-on-exec) or -errno. */
  open(at: At, flags: number, mode = 0): number {
    return ret(sym.openat(at.fd, at.name, flags | O.CLOEXEC | O.NOFOLLOW, mode));
  }
  /** mkdirat(2): 0 or -errno. */
  mkdir(at: At, mode: number): number {
    return ret(sym.mkdirat(at.fd, at.name, mode));
  }
  /** mknodat(2): 0 or -errno. */
  mknod(at: At, options: { mode: number; dev: number }): number {
    return ret(sym.mknodat(at.fd, at.name, options.mode, BigInt(options.dev)));
  }
  /** unlinkat(2) of a non-directory (a symlink is removed, not followed): 0 or -errno. */
  unlink(at: At): number {
    return ret(sym.unlinkat(at.fd, at.name, 0));
  }
  /** unlinkat(2) with AT_REMOVEDIR: 0 or -errno. */
  rmdir(at: At): number {
    return ret(sym.unlinkat(at.fd, at.name, REMOVEDIR));
  }
  /** renameat2(2) of the names themselves: 0 or -errno. */
  rename(from: At, to: At, options: { flags?: number } = {}): number {
    return ret(sym.renameat2(from.fd, from.name, to.fd, to.name, options.flags ?? 0));
  }
  /** symlinkat(2): makes `at` point at `target`; 0 or -errno. */
  symlink(target: Uint8Array, at: At): number {
    return ret(sym.symlinkat(target, at.fd, at.name));
  }
  /** readlinkat(2): the target bytes (a copy) or -errno. */
  readlink(at: At): Uint8Array | number {
    const n = sym.readlinkat(at.fd, at.name, linkBuf, LINK_SIZE);
    return n < 0 ? -errno() : linkBuf.slice(0, n);
  }
  /**
   * linkat(2) giving the open file `fd` (an O_TMPFILE file, or one whose names are gone) the name
   * `to`: through this process's own `/proc/self/fd/<fd>` magic link (AT_SYMLINK_FOLLOW), which
   * names the open file itself, not a path anyone can change; 0 or -errno.
   */
  linkFd(fd: number, to: At): number {
    const proc = new TextEncoder().encode(`/proc/self/fd/${fd}\0`);
    return ret(sym.linkat(AT_FDCWD, proc, to.fd, to.name, SYMLINK_FOLLOW));
  }
  /** linkat(2) without following `from`: 0 or -errno. */
  link(from: At, to: At): number {
    return ret(sym.linkat(from.fd, from.name, to.fd, to.name, 0));
  }
  /** Truncates a regular file by name (there is no truncateat; O_NOFOLLOW, O_NONBLOCK): 0 or -errno. */
  truncate(at: At, size: number): number {
    const fd = this.open(at, O.WRONLY | O.NONBLOCK);
    if (fd < 0) return fd;
    const r = ret(sym.ftruncate(fd, BigInt(size)));
    close(fd);
    return r;
  }
  /**
   * fchmodat2(2) with AT_SYMLINK_NOFOLLOW (Linux 6.6+: one system call; a symlink answers
   * EOPNOTSUPP); on an older kernel (ENOSYS) glibc's fchmodat, which does the same through an
   * O_PATH fd and `/proc/self/fd` (four calls). 0 or -errno.
   */
  chmod(at: At, mode: number): number {
    if (hasFchmodat2) {
      const r = sym.sys_fchmodat2(SYS.fchmodat2, at.fd, at.name, mode, NOFOLLOW);
      if (r >= 0) return 0;
      const e = errno();
      if (e !== ENOSYS) return -e;
      hasFchmodat2 = false;
    }
    return ret(sym.fchmodat(at.fd, at.name, mode, NOFOLLOW));
  }
  /** fchownat(2) without following; -1 leaves that id unchanged: 0 or -errno. */
  lchown(at: At, ids: { uid: number; gid: number }): number {
    return ret(sym.fchownat(at.fd, at.name, ids.uid >>> 0, ids.gid >>> 0, NOFOLLOW));
  }
  /** utimensat(2) without following; nsec may be UTIME.NOW/OMIT: 0 or -errno. */
  utimens(at: At, times: { atime: [number, number]; mtime: [number, number] }): number {
    const { atime, mtime } = times;
    tsView.setBigInt64(0, BigInt(atime[0]), true);
    tsView.setBigInt64(8, BigInt(atime[1]), true);
    tsView.setBigInt64(16, BigInt(mtime[0]), true);
    tsView.setBigInt64(24, BigInt(mtime[1]), true);
    return ret(sym.utimensat(at.fd, at.name, tsBuf, NOFOLLOW));
  }
  /**
   * getxattr of `name` (NUL-terminated) on the name itself (getxattrat AT_SYMLINK_NOFOLLOW): the
   * value's length, its bytes in {@link xattrBuf} unless `probe` (length only); or -errno.
   */
  getxattr(at: At, name: Uint8Array, options: { probe?: boolean } = {}): number {
    xargs[0] = options.probe ? 0n : XATTR_BUF_ADDR;
    xargsView.setUint32(8, options.probe ? 0 : XATTR_MAX, true);
    xargsView.setUint32(12, 0, true);
    return ret(
      sym.sys_getxattrat(SYS.getxattrat, at.fd, at.name, NOFOLLOW, name, xargsBytes, XARGS_SIZE),
    );
  }
  /** listxattr of the name itself (listxattrat AT_SYMLINK_NOFOLLOW) into {@link xattrBuf}: its length or -errno. */
  listxattr(at: At): number {
    return ret(
      sym.sys_listxattrat(SYS.listxattrat, at.fd, at.name, NOFOLLOW, xattrBuf, XATTR_MAX_N),
    );
  }
  /** setxattr of `name` to `value` (flags XATTR_CREATE=1 / XATTR_REPLACE=2) on the name itself: 0 or -errno. */
  setxattr(at: At, name: Uint8Array, value: Uint8Array, flags: number): number {
    const copy = value.slice(); // a buffer of its own: its address goes into the argument struct
    xargs[0] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(copy)));
    xargsView.setUint32(8, copy.length, true);
    xargsView.setUint32(12, flags, true);
    const r = sym.sys_setxattrat(
      SYS.setxattrat,
      at.fd,
      at.name,
      NOFOLLOW,
      name,
      xargsBytes,
      XARGS_SIZE,
    );
    return ret(r);
  }
  /** removexattr of `name` on the name itself: 0 or -errno. */
  removexattr(at: At, name: Uint8Array): number {
    return ret(sym.sys_removexattrat(SYS.removexattrat, at.fd, at.name, NOFOLLOW, name));
  }
  /** fstatvfs(3) of the tree's file system: its counters or -errno. */
  statvfs(): StatVfs | number {
    if (sym.fstatvfs(this.fd, vfsBuf) < 0) return -errno();
    const g = (o: number) =>
      vfsView.getUint32(o, true) + vfsView.getUint32(o + 4, true) * 0x1_0000_0000;
    return {
      bsize: g(0),
      frsize: g(8),
      blocks: g(16),
      bfree: g(24),
      bavail: g(32),
      files: g(40),
      ffree: g(48),
      namemax: g(80),
    };
  }
  /** Lists a directory with getdents64 (without "." and ".."): entries or -errno. */
  list(at: At): Dirent[] | number {
    const out: Dirent[] = [];
    const r = this.scan(at, (buf, start, end, type, ino) => {
      out.push({ name: buf.slice(start, end), type, ino });
    });
    return r < 0 ? r : out;
  }
  /**
   * Calls `each` for every entry but "." and ".." with the name as `buf[start..end)` (valid only
   * during the call: nothing is allocated per entry); 0 or -errno.
   */
  scan(
    at: At,
    each: (buf: Uint8Array, start: number, end: number, type: number, ino: number) => void,
  ): number {
    const fd = this.open(at, O.RDONLY | O.DIRECTORY);
    if (fd < 0) return fd;
    try {
      for (;;) {
        const n = sym.getdents64(fd, dentBuf, DENT_SIZE);
        if (n < 0) return -errno();
        if (n === 0) return 0;
        // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name (NUL-terminated)
        for (let at = 0; at < n;) {
          const reclen = dentView.getUint16(at + 16, true);
          const start = at + 19;
          const end = dentBuf.indexOf(0, start);
          const len = end - start;
          const dot = dentBuf[start] === 46 &&
            (len === 1 || (len === 2 && dentBuf[start + 1] === 46));
          if (!dot) {
            const ino = dentView.getUint32(at, true) +
              dentView.getUint32(at + 4, true) * 0x1_0000_0000;
            each(dentBuf, start, end, dentBuf[at + 18], ino);
          }
          at += reclen;
        }
      }
    } finally {
      close(fd);
    }
  }
  /** fstat(2) of the directory itself. */
  stat(): Stat | number {
    return fstat(this.fd);
  }
  /** Closes the fd. */
  close(): void {
    close(this.fd);
  }
}
