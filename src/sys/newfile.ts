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
  const fd = createNew(path, bytes, options);
  if (fd < 0) return fd;
  const s = libc();
  let err = options.sync && s.fsync(fd) < 0 ? -errno() : 0;
  if (s.close(fd) < 0 && err === 0) err = -errno();
  return err;
}

/**
 * {@link writeNew} up to the fsync: the open descriptor is returned (or -errno, the file then
 * closed) for the caller to fsync (e.g. off the JS thread) and close.
 */
export function createNew(
  path: string,
  bytes: Uint8Array,
  options: { mode: number; uid?: number; gid?: number },
): number {
  if (!ffiGranted()) return -ENOSYS;
  const s = libc();
  const fd = s.open(new TextEncoder().encode(path + "\0"), CREATE, options.mode);
  if (fd < 0) return -errno();
  const fail = () => {
    const err = -errno();
    s.close(fd);
    return err;
  };
  let off = 0;
  while (off < bytes.length) {
    const n = s.write(fd, bytes.subarray(off), BigInt(bytes.length - off));
    if (n < 0) return fail();
    off += n;
  }
  // chown before chmod: a chown clears set-id bits; fchmod also undoes the umask.
  if (options.uid !== undefined && options.gid !== undefined) {
    if (s.fchown(fd, options.uid, options.gid) < 0) return fail();
  }
  if (s.fchmod(fd, options.mode) < 0) return fail();
  return fd;
}

/** The directory `path` opened as {@link syncDirectory} opens it: an fd or -errno (-ENOSYS without FFI). */
export function openDirectory(path: string): number {
  if (!ffiGranted()) return -ENOSYS;
  const fd = libc().open(new TextEncoder().encode(path + "\0"), DIR, 0);
  return fd < 0 ? -errno() : fd;
}

/**
 * fsyncs the directory `path` through an fd opened O_DIRECTORY|O_NONBLOCK (a FIFO swapped in for
 * it answers ENOTDIR instead of blocking the thread). Returns 0 or -errno (-ENOSYS without FFI:
 * the caller takes the path-based route).
 */
export function syncDirectory(path: string): number {
  const fd = openDirectory(path);
  if (fd < 0) return fd;
  const s = libc();
  const err = s.fsync(fd) < 0 ? -errno() : 0;
  s.close(fd);
  return err;
}

/** close(2) of an fd {@link createNew} or {@link openDirectory} returned. */
export function closeFd(fd: number): void {
  libc().close(fd);
}

/**
 * fsyncs `fd` on a worker thread (the JS thread goes on), then closes it: 0, or -5 (EIO) when the
 * fsync failed (errno is thread-local, unreadable after a nonblocking call).
 */
export async function syncClose(fd: number): Promise<number> {
  const r = await libc().fsync_async(fd);
  libc().close(fd);
  return r < 0 ? -5 : 0;
}
