/** Writes a brand-new file through one descriptor (O_EXCL|O_NOFOLLOW create, write, fchown, fchmod, fsync), and fsyncs directories. */

type Lib = {
  symbols: {
    __errno_location(): Deno.PointerValue;
    open(path: Uint8Array, flags: number, mode: number): number;
    write(fd: number, buf: Uint8Array, len: bigint): bigint;
    fchmod(fd: number, mode: number): number;
    fchown(fd: number, uid: number, gid: number): number;
    fsync(fd: number): number;
    close(fd: number): number;
  };
};

// O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC (x86_64 and aarch64 share these values)
const CREATE = 0o1 | 0o100 | 0o200 | 0o400000 | 0o2000000;
// O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC: anything but a directory fails at once (ENOTDIR)
const DIR = 0o200000 | 0o4000 | 0o2000000;

let lib: Lib | null | undefined;

/**
 * libc through FFI, opened on first use and only where --allow-ffi is granted (tsh has no FFI:
 * it gets null and its caller takes the path-based route).
 */
function libc(): Lib | null {
  if (lib !== undefined) return lib;
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return lib = null;
  lib = Deno.dlopen("libc.so.6", {
    __errno_location: { parameters: [], result: "pointer" },
    open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
    write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
    fchmod: { parameters: ["i32", "u32"], result: "i32" },
    fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
    fsync: { parameters: ["i32"], result: "i32" },
    close: { parameters: ["i32"], result: "i32" },
  }) as unknown as Lib;
  return lib;
}

function errno(l: Lib): number {
  const p = l.symbols.__errno_location();
  return p ? new Deno.UnsafePointerView(p).getInt32() : 5;
}

/** True when {@link writeNew} can work here (FFI granted). */
export function canWriteNew(): boolean {
  return libc() !== null;
}

/**
 * Creates `path` (which must not exist; a symlink there is refused), writes `bytes`, then sets
 * owner and mode on the descriptor (never by path) and fsyncs. Returns 0 or an errno number.
 */
export function writeNew(
  path: string,
  bytes: Uint8Array,
  options: { mode: number; uid?: number; gid?: number; sync: boolean },
): number {
  const l = libc();
  if (!l) return 38; // ENOSYS: no FFI here
  const s = l.symbols;
  const fd = s.open(new TextEncoder().encode(path + "\0"), CREATE, options.mode);
  if (fd < 0) return errno(l);
  let err = 0;
  try {
    let off = 0;
    while (off < bytes.length) {
      const n = Number(s.write(fd, bytes.subarray(off), BigInt(bytes.length - off)));
      if (n < 0) return err = errno(l);
      off += n;
    }
    // chown before chmod: a chown clears set-id bits; fchmod also undoes the umask.
    if (options.uid !== undefined && options.gid !== undefined) {
      if (s.fchown(fd, options.uid, options.gid) < 0) return err = errno(l);
    }
    if (s.fchmod(fd, options.mode) < 0) return err = errno(l);
    if (options.sync && s.fsync(fd) < 0) return err = errno(l);
    return 0;
  } finally {
    if (s.close(fd) < 0 && err === 0) err = errno(l);
  }
}

/**
 * fsyncs the directory `path` through an fd opened O_DIRECTORY|O_NONBLOCK (a FIFO swapped in for
 * it answers ENOTDIR instead of blocking the thread). Returns 0 or an errno number (ENOSYS
 * without FFI: the caller takes the path-based route).
 */
export function syncDirectory(path: string): number {
  const l = libc();
  if (!l) return 38;
  const s = l.symbols;
  const fd = s.open(new TextEncoder().encode(path + "\0"), DIR, 0);
  if (fd < 0) return errno(l);
  const err = s.fsync(fd) < 0 ? errno(l) : 0;
  s.close(fd);
  return err;
}
