/** Writes a brand-new file through one descriptor (O_EXCL|O_NOFOLLOW create, write, fchown, fchmod, fsync), and fsyncs directories. */
import { ARCH } from "./arch.ts";
import { errno, ffiGranted, libc } from "./ffi.ts";

const O = ARCH.O;
const CREATE = O.WRONLY | O.CREAT | O.EXCL | O.NOFOLLOW | O.CLOEXEC;
// Anything but a directory fails at once (ENOTDIR): a FIFO swapped in never blocks the thread.
const DIR = O.RDONLY | O.DIRECTORY | O.NONBLOCK | O.CLOEXEC;
const ENOSYS = 38;

/** True when {@link writeNew} can work here (FFI granted: tsh has none and takes the path route). */
export function canWriteNew(): boolean {
  return ffiGranted();
}

/**
 * Creates `path` (which must not exist; a symlink there is refused), writes `bytes`, then sets
 * owner and mode on the descriptor (never by path) and fsyncs. Returns 0 or -errno.
 */
export function writeNew(
  path: string,
  bytes: Uint8Array,
  options: { mode: number; uid?: number; gid?: number; sync: boolean },
): number {
  if (!ffiGranted()) return -ENOSYS;
  const s = libc();
  const fd = s.open(new TextEncoder().encode(path + "\0"), CREATE, options.mode);
  if (fd < 0) return -errno();
  let err = 0;
  try {
    let off = 0;
    while (off < bytes.length) {
      const n = s.write(fd, bytes.subarray(off), BigInt(bytes.length - off));
      if (n < 0) return err = -errno();
      off += n;
    }
    // chown before chmod: a chown clears set-id bits; fchmod also undoes the umask.
    if (options.uid !== undefined && options.gid !== undefined) {
      if (s.fchown(fd, options.uid, options.gid) < 0) return err = -errno();
    }
    if (s.fchmod(fd, options.mode) < 0) return err = -errno();
    if (options.sync && s.fsync(fd) < 0) return err = -errno();
    return 0;
  } finally {
    if (s.close(fd) < 0 && err === 0) err = -errno();
  }
}

/**
 * fsyncs the directory `path` through an fd opened O_DIRECTORY|O_NONBLOCK (a FIFO swapped in for
 * it answers ENOTDIR instead of blocking the thread). Returns 0 or -errno (-ENOSYS without FFI:
 * the caller takes the path-based route).
 */
export function syncDirectory(path: string): number {
  if (!ffiGranted()) return -ENOSYS;
  const s = libc();
  const fd = s.open(new TextEncoder().encode(path + "\0"), DIR, 0);
  if (fd < 0) return -errno();
  const err = s.fsync(fd) < 0 ? -errno() : 0;
  s.close(fd);
  return err;
}
