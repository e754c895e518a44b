/** Errno names, their Linux numbers, and the one error type that carries them. */

/** Linux x86_64 errno numbers for the names CortexFS reports. */
export const ERRNO = {
  EPERM: 1,
  ENOENT: 2,
  ESRCH: 3,
  EINTR: 4,
  EIO: 5,
  ENXIO: 6,
  E2BIG: 7,
  EBADF: 9,
  EAGAIN: 11,
  ENOMEM: 12,
  EACCES: 13,
  EFAULT: 14,
  EBUSY: 16,
  EEXIST: 17,
  EXDEV: 18,
  ENODEV: 19,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  EMFILE: 24,
  ENOTTY: 25,
  EFBIG: 27,
  ENOSPC: 28,
  ESPIPE: 29,
  EROFS: 30,
  EMLINK: 31,
  EPIPE: 32,
  ERANGE: 34,
  ENAMETOOLONG: 36,
  ENOSYS: 38,
  ENOTEMPTY: 39,
  ELOOP: 40,
  ENODATA: 61,
  EPROTO: 71,
  EOVERFLOW: 75,
  EILSEQ: 84,
  EMSGSIZE: 90,
  ENOTSUP: 95,
  EADDRINUSE: 98,
  ENOTCONN: 107,
  ETIMEDOUT: 110,
  ECONNREFUSED: 111,
  EHOSTDOWN: 112,
  EALREADY: 114,
  ECANCELED: 125,
} as const;

/** A stable errno name such as `EINVAL`. */
export type Errno = keyof typeof ERRNO;

/** True when `s` is an errno name this table knows. */
export function isErrno(s: string): s is Errno {
  return Object.hasOwn(ERRNO, s);
}

/** The errno name for a Linux errno number; unknown numbers are EIO. */
export function errnoName(n: number): Errno {
  for (const [k, v] of Object.entries(ERRNO)) if (v === n) return k as Errno;
  return "EIO";
}

/**
 * The typed error every layer throws for an expected failure: an errno name, which rule failed,
 * and (when known) the path it concerns.
 */
export class CtxError extends Error {
  readonly errno: Errno;
  readonly path?: string;
  constructor(errno: Errno, message: string, options: { path?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "CtxError";
    this.errno = errno;
    this.path = options.path;
  }
  /** `EINVAL: <path>: <message>` as printed by the CLIs. */
  override toString(): string {
    return this.path
      ? `${this.errno}: ${this.path}: ${this.message}`
      : `${this.errno}: ${this.message}`;
  }
}

/** Converts anything thrown into a CtxError: Deno/Node fs errors keep their errno, the rest is EIO. */
export function toCtxError(e: unknown, path?: string): CtxError {
  if (e instanceof CtxError) return e;
  const code = (e as { code?: unknown })?.code;
  const msg = e instanceof Error ? e.message : String(e);
  if (typeof code === "string" && isErrno(code)) return new CtxError(code, msg, { path, cause: e });
  if (e instanceof Deno.errors.NotFound) return new CtxError("ENOENT", msg, { path, cause: e });
  if (e instanceof Deno.errors.PermissionDenied) {
    return new CtxError("EACCES", msg, { path, cause: e });
  }
  if (e instanceof Deno.errors.AlreadyExists) {
    return new CtxError("EEXIST", msg, { path, cause: e });
  }
  if (e instanceof Deno.errors.NotADirectory) {
    return new CtxError("ENOTDIR", msg, { path, cause: e });
  }
  if (e instanceof Deno.errors.IsADirectory) return new CtxError("EISDIR", msg, { path, cause: e });
  if (e instanceof Deno.errors.InvalidData) return new CtxError("EINVAL", msg, { path, cause: e });
  return new CtxError("EIO", msg, { path, cause: e });
}

/** An error class (`Deno.errors.NotFound`) or an errno name (matched against `code` or `CtxError.errno`). */
export type ErrorKind = (abstract new (...args: never[]) => Error) | Errno;

/** True when `e` is one of `kinds`. */
export function isKind(e: unknown, ...kinds: ErrorKind[]): boolean {
  const code = e instanceof CtxError ? e.errno : (e as { code?: unknown })?.code;
  return kinds.some((k) => typeof k === "string" ? code === k : e instanceof k);
}

/**
 * For a catch that expects one failure: returns when `e` is one of `kinds` (a file that is absent,
 * a process already gone), rethrows anything else, so an EMFILE or EACCES is never read as absent.
 */
export function ignore(e: unknown, ...kinds: ErrorKind[]): void {
  if (!isKind(e, ...kinds)) throw e;
}

/** Process exit codes of the CLIs (spec: 0 ok, 1 generic, 2 usage/invalid, 13 EACCES, 69 unavailable, 70 internal). */
export const EXIT = {
  ok: 0,
  generic: 1,
  usage: 2,
  access: 13,
  unavailable: 69,
  internal: 70,
} as const;

/** The exit code a CLI uses for an errno. */
export function exitCode(errno: Errno): number {
  switch (errno) {
    case "EINVAL":
    case "EMSGSIZE":
    case "ENAMETOOLONG":
    case "ERANGE":
    case "E2BIG":
      return EXIT.usage;
    case "EACCES":
    case "EPERM":
      return EXIT.access;
    case "ECONNREFUSED":
    case "EHOSTDOWN":
    case "ENOTCONN":
    case "ENXIO":
      return EXIT.unavailable;
    default:
      return EXIT.generic;
  }
}
