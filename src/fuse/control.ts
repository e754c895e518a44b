/** Control-file handles: writes are buffered per open file, validated and committed atomically. */
import { CtxError, ERRNO, toCtxError } from "../abi/errno.ts";
import { MAX_CONTROL_BYTES } from "../abi/text.ts";

/** Validates and atomically replaces one control (the store bridge's writeControl, bound to a root). */
export type Commit = (
  abiPath: string,
  bytes: Uint8Array,
  options: { uid: number; gid: number },
) => void;

/** An in-memory temp file in a control directory (`sed -i`'s sedXXXXXX, `.window.tmp-…`). */
export interface Temp {
  data: Uint8Array;
  len: number;
  mode: number;
  uid: number;
  gid: number;
  /** Modification and change time, unix seconds (fractional). */
  mtime: number;
  ctime: number;
  ino: number;
}

/** Makes an empty temp owned by `uid:gid` with permission bits `mode`. */
export function newTemp(options: { mode: number; uid: number; gid: number; ino: number }): Temp {
  const now = Date.now() / 1000;
  return { data: new Uint8Array(256), len: 0, ...options, mtime: now, ctime: now };
}

/** Writes `data` at `offset` into a growable buffer; EMSGSIZE beyond the 64 KiB control limit. */
export function put(
  t: { data: Uint8Array; len: number },
  offset: number,
  data: Uint8Array,
): number {
  const end = offset + data.length;
  if (end > MAX_CONTROL_BYTES) return -ERRNO.EMSGSIZE;
  if (end > t.data.length) {
    const grown = new Uint8Array(Math.min(MAX_CONTROL_BYTES, Math.max(end, t.data.length * 2)));
    grown.set(t.data.subarray(0, t.len));
    t.data = grown;
  }
  if (offset > t.len) t.data.fill(0, t.len, offset);
  t.data.set(data, offset);
  t.len = Math.max(t.len, end);
  return data.length;
}

/** Sets the length of a buffer (truncate or zero-extend); EMSGSIZE beyond 64 KiB. */
export function resize(t: { data: Uint8Array; len: number }, size: number): number {
  if (size > MAX_CONTROL_BYTES) return -ERRNO.EMSGSIZE;
  if (size > t.len) return put(t, size, new Uint8Array(0)) < 0 ? -ERRNO.EMSGSIZE : 0;
  t.len = size;
  return 0;
}

/**
 * A control opened for writing. The content starts as the control's bytes (or empty with
 * O_TRUNC); every write is applied to the buffer and the buffer is offered to validation at once:
 * valid content is committed (atomic replace) right away. Invalid content written at offset 0 —
 * the whole new file in one write, which is what `echo`, `printf`, `tee` and `cp` do for anything
 * up to 64 KiB because st_blksize is 64 KiB — fails that write with the rule's errno. Invalid
 * content that ends a line fails its write too; content ending mid-line stays pending and is
 * judged again at FLUSH (close).
 */
export class ControlWriter {
  readonly path: string;
  readonly uid: number;
  readonly gid: number;
  data: Uint8Array;
  len: number;
  /** Buffer differs from what is committed (a truncation or a write is pending). */
  dirty: boolean;
  #commit: Commit;

  constructor(
    path: string,
    options: {
      uid: number;
      gid: number;
      initial: Uint8Array;
      truncated: boolean;
      commit: Commit;
    },
  ) {
    this.path = path;
    this.uid = options.uid;
    this.gid = options.gid;
    this.data = new Uint8Array(Math.max(256, options.initial.length));
    this.data.set(options.initial);
    this.len = options.initial.length;
    this.dirty = options.truncated;
    this.#commit = options.commit;
  }

  /** WRITE: bytes accepted or -errno. */
  write(offset: number, data: Uint8Array): number {
    const n = put(this, offset, data);
    if (n < 0) return n;
    this.dirty = true;
    const err = this.#try();
    if (err === 0) return n;
    // Judged final, so the writer hears the errno from write(2) (shells ignore close errors): the
    // whole file written at offset 0, or content that ends a line (`echo bad >> policy`). A later
    // chunk ending mid-line may still be completed by the next write: FLUSH decides.
    if (offset === 0 || this.data[this.len - 1] === 0x0a) {
      this.dirty = false; // nothing of this content is committed later
      return err;
    }
    return n;
  }

  /** SETATTR size through this handle (ftruncate): pending until the next write or close. */
  truncate(size: number): number {
    const r = resize(this, size);
    if (r === 0) this.dirty = true;
    return r;
  }

  /** FLUSH / FSYNC / RELEASE: commits pending content; 0 or -errno (the control keeps its bytes). */
  flush(): number {
    if (!this.dirty) return 0;
    this.dirty = false;
    return this.#try();
  }

  /** The current content (for reads through the same handle). */
  bytes(): Uint8Array {
    return this.data.subarray(0, this.len);
  }

  #try(): number {
    try {
      this.#commit(this.path, this.data.slice(0, this.len), { uid: this.uid, gid: this.gid });
      this.dirty = false;
      return 0;
    } catch (e) {
      const err = e instanceof CtxError ? e : toCtxError(e, this.path);
      return -ERRNO[err.errno];
    }
  }
}
