/** Files the daemon reads or appends in trees users own: opened without blocking or following, fstat-checked as regular. */
import { CtxError, errnoName } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";

const { O } = libc;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const KIND: Record<number, string> = {
  0o010000: "a FIFO",
  0o020000: "a character device",
  0o040000: "a directory",
  0o060000: "a block device",
  0o120000: "a symlink",
  0o140000: "a socket",
};
// Errors of open(2) that mean the name is something other than a regular file.
const SPECIAL: Record<number, string> = {
  6: "a socket or a FIFO", // ENXIO
  21: "a directory", // EISDIR
  40: "a symlink", // ELOOP under O_NOFOLLOW
};

/**
 * EIO naming `path` (and logged: a planted special file is an attack or a broken tree worth a
 * line on stderr, whoever asked).
 */
function refuse(path: string, kind: string): CtxError {
  const err = new CtxError(
    "EIO",
    `${path} is ${kind}, not a regular file (never opened or followed)`,
    { path },
  );
  console.error(`cortexfs: EIO: ${err.message}`);
  return err;
}

/** Options for {@link openRegular}. */
export interface RegularOptions {
  /** Open read-write with O_APPEND (else read-only). */
  append?: boolean;
  /** Create a missing file with this mode (only with `append`). */
  create?: number;
}

/**
 * Opens `path` as a regular file and returns the fd (the caller closes it with `libc.close`).
 * O_NONBLOCK: a FIFO (or a lease) never makes open wait, and the one JS thread never freezes;
 * O_NOFOLLOW: a symlink in the last component is refused, not followed; O_NOCTTY: a terminal
 * device never becomes ours. The type is checked on the opened fd (fstat), never by a separate
 * lstat that a swap could race. Anything but a regular file: EIO with the path; missing: ENOENT.
 */
export function openRegular(path: string, options: RegularOptions = {}): number {
  const flags = (options.append ? O.RDWR | O.APPEND : O.RDONLY) |
    (options.create !== undefined ? O.CREAT : 0) | O.NONBLOCK | O.NOFOLLOW | O.NOCTTY;
  const fd = libc.open(libc.cstr(path), flags, options.create ?? 0);
  if (fd < 0) {
    if (SPECIAL[-fd]) throw refuse(path, SPECIAL[-fd]);
    throw new CtxError(errnoName(-fd), `cannot open ${path}`, { path });
  }
  const st = libc.fstat(fd);
  const mode = typeof st === "number" ? -1 : st.mode;
  if (mode < 0 || (mode & S_IFMT) !== S_IFREG) {
    libc.close(fd);
    if (typeof st === "number") {
      throw new CtxError(errnoName(-st), `cannot fstat ${path}`, { path });
    }
    throw refuse(path, KIND[mode & S_IFMT] ?? `of type 0o${(mode & S_IFMT).toString(8)}`);
  }
  return fd;
}

/** The size of an open file (fstat), or EIO naming `path`. */
export function sizeOf(fd: number, path: string): number {
  const st = libc.fstat(fd);
  if (typeof st === "number") throw new CtxError(errnoName(-st), `cannot fstat ${path}`, { path });
  return st.size;
}

/**
 * The bytes of the regular file `path` (at most `max` of them), through {@link openRegular};
 * undefined when it does not exist. Everything else that fails throws a CtxError with the path.
 * `limit`: a file larger than that many bytes is refused with EFBIG, from its size before a byte
 * is read (a sparse file of holes costs nothing) and again if it grows while read.
 */
export function readRegular(
  path: string,
  options: { max?: number; limit?: number } = {},
): Uint8Array | undefined {
  let fd: number;
  try {
    fd = openRegular(path);
  } catch (e) {
    if (e instanceof CtxError && e.errno === "ENOENT") return undefined;
    throw e;
  }
  try {
    const limit = options.limit ?? Infinity;
    const size = sizeOf(fd, path);
    const big = () =>
      new CtxError("EFBIG", `${path} is larger than ${limit} bytes: not read`, { path });
    if (size > limit) throw big();
    const max = Math.min(options.max ?? Infinity, limit + 1);
    // One byte more than the size: a file that did not grow is read to its EOF in one call.
    let buf = new Uint8Array(Math.min(max, size + 1));
    let off = 0;
    while (off < buf.length) {
      const n = libc.read(fd, buf.subarray(off));
      if (n < 0) throw new CtxError(errnoName(-n), `cannot read ${path}`, { path });
      if (n === 0) break;
      off += n;
      if (off === buf.length && off < max) {
        const more = new Uint8Array(Math.min(max, buf.length * 2));
        more.set(buf);
        buf = more;
      }
    }
    if (off > limit) throw big();
    return buf.subarray(0, off);
  } finally {
    libc.close(fd);
  }
}

/** {@link readRegular} decoded as UTF-8 (invalid bytes replaced); missing: undefined. */
export function readRegularText(
  path: string,
  options: { limit?: number } = {},
): string | undefined {
  const bytes = readRegular(path, options);
  return bytes && new TextDecoder().decode(bytes);
}

/**
 * Checks that `path` is a regular file or absent (with `create`: makes a missing one with that
 * mode), without reading it; EIO otherwise.
 */
export function checkRegular(path: string, options: { create?: number } = {}): void {
  const create = options.create;
  try {
    libc.close(openRegular(path, create === undefined ? {} : { append: true, create }));
  } catch (e) {
    if (!(e instanceof CtxError && e.errno === "ENOENT" && create === undefined)) throw e;
  }
}
