/** Control-file handles: writes are buffered per open file, validated and committed atomically. */
import { CtxError, ERRNO, toCtxError } from "../abi/errno.ts";
import { MAX_CONTROL_BYTES } from "../abi/text.ts";

/** Validates and atomically replaces one control (the store bridge's writeControl, bound to a root). */
export type Commit = (
  abiPath: string,
  bytes: Uint8Array,
  options: { uid: number; gid: number },
) => void;

/** Told of a handle's first refused write: the ABI path, the writer's uid and the rule's error. */
export type Refused = (abiPath: string, uid: number, err: CtxError) => void;

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
 * A control opened for writing: all or nothing per open file description. The content starts as
 * the control's bytes (or empty with O_TRUNC) and every WRITE or ftruncate changes only this
 * buffer; readers keep seeing the committed bytes until the handle commits the whole buffer
 * through validation and an atomic replace.
 *
 * - WRITE validates (without committing) content that is judged final: written at offset 0 (the
 *   whole file in one write, which `echo`, `printf`, `tee` and `cp` do for anything up to 64 KiB
 *   because st_blksize is 64 KiB) or ending a line. Invalid final content, or content crossing
 *   64 KiB, fails that write(2) with the rule's errno (shells ignore close errors, so this is
 *   what they hear) and spoils the handle: nothing it holds is ever committed, and every later
 *   write, ftruncate and FLUSH answers the same errno. Content ending mid-line stays pending.
 * - FLUSH (each close of a descriptor) from the process that flushed the handle first commits
 *   the buffer when anything was written or truncated; an invalid buffer spoils the handle.
 *   Other processes' FLUSHes (forked commands sharing a redirection) and a FLUSH before any
 *   write (a shell closes the opened fd right after dup2, with O_TRUNC pending) only validate:
 *   they report the errno, commit nothing and spoil nothing.
 * - RELEASE (the last reference gone) commits what is still pending and valid (`: > policy`).
 */
export class ControlWriter {
  readonly path: string;
  readonly uid: number;
  readonly gid: number;
  data: Uint8Array;
  len: number;
  /** Buffer differs from what is committed (a truncation or a write is pending). */
  dirty: boolean;
  /** The first failure (-errno); once set, nothing of this handle is committed. */
  failed = 0;
  /** A WRITE or ftruncate changed the buffer (O_TRUNC alone does not count). */
  #changed = false;
  /** The lock owner (open file table) of the first FLUSH: the opener, in practice. */
  #flusher: number | null = null;
  #append: boolean;
  #commit: Commit;
  #check: Commit;
  #refused?: Refused;
  #accepted?: (abiPath: string, uid: number) => void;

  constructor(
    path: string,
    options: {
      uid: number;
      gid: number;
      initial: Uint8Array;
      truncated: boolean;
      /** Opened with O_APPEND: every write goes to the end of this handle's content. */
      append?: boolean;
      /** Validates and atomically replaces the control. */
      commit: Commit;
      /** Validates only (the same rules, nothing written). */
      check: Commit;
      /** Told of the first refusal of this handle (a writer sees only the errno). */
      refused?: Refused;
      /** Told of each commit (the writer's earlier refusal is no longer why). */
      accepted?: (abiPath: string, uid: number) => void;
    },
  ) {
    this.path = path;
    this.uid = options.uid;
    this.gid = options.gid;
    this.data = new Uint8Array(Math.max(256, options.initial.length));
    this.data.set(options.initial);
    this.len = options.initial.length;
    this.dirty = options.truncated;
    this.#append = options.append ?? false;
    this.#commit = options.commit;
    this.#check = options.check;
    this.#refused = options.refused;
    this.#accepted = options.accepted;
  }

  /** WRITE: bytes accepted or -errno (EMSGSIZE past 64 KiB; the rule's errno for final content). */
  write(offset: number, data: Uint8Array): number {
    if (this.failed) return this.failed;
    // The kernel places an O_APPEND write at its cached file size, which a GETATTR (still the
    // committed size) may have reset meanwhile: the end of this handle's content is the truth.
    if (this.#append) offset = this.len;
    const n = put(this, offset, data);
    if (n < 0) return (this.failed = n);
    this.dirty = this.#changed = true;
    // Judged final, so the writer hears the errno from write(2): the whole file written at
    // offset 0, or content that ends a line (`echo bad >> policy`). A later chunk ending
    // mid-line may still be completed by the next write: FLUSH decides.
    if (offset === 0 || this.data[this.len - 1] === 0x0a) {
      const err = this.#run(this.#check);
      if (err < 0) return (this.failed = err);
    }
    return n;
  }

  /** SETATTR size through this handle (ftruncate): pending until the handle commits. */
  truncate(size: number): number {
    if (this.failed) return this.failed;
    const r = resize(this, size);
    if (r < 0) return (this.failed = r);
    this.dirty = this.#changed = true;
    return 0;
  }

  /**
   * FLUSH (close(2) of one descriptor, `owner` = the closing process's lock owner) or FSYNC
   * (`owner` null: the caller asked for what it wrote to be durable): 0 or -errno.
   */
  flush(owner: number | null): number {
    if (owner !== null) this.#flusher ??= owner;
    if (this.failed) return this.failed;
    if (!this.dirty) return 0;
    if (!this.#changed || (owner !== null && owner !== this.#flusher)) {
      // Not told: nothing written yet (the close of the fd `>` opened before the shell dup2s
      // it) or another descriptor's close. Each `>` write used to log "the file is empty".
      return this.#run(this.#check, { quiet: true });
    }
    const err = this.#run(this.#commit);
    if (err < 0) return (this.failed = err);
    this.dirty = false;
    return 0;
  }

  /** RELEASE: commits what is pending and valid; nobody is left to hear an error. */
  release(): void {
    if (!this.failed && this.dirty && this.#run(this.#commit) === 0) this.dirty = false;
  }

  /** The current content (for reads through the same handle). */
  bytes(): Uint8Array {
    return this.data.subarray(0, this.len);
  }

  #run(f: Commit, options: { quiet?: boolean } = {}): number {
    try {
      f(this.path, this.data.slice(0, this.len), { uid: this.uid, gid: this.gid });
      if (f === this.#commit) this.#accepted?.(this.path, this.uid);
      return 0;
    } catch (e) {
      const err = e instanceof CtxError ? e : toCtxError(e, this.path);
      if (options.quiet) return -ERRNO[err.errno];
      // write(2)/close(2) carry only the errno: the rule goes to the daemon log, once a handle.
      if (this.#refused) this.#refused(this.path, this.uid, err);
      this.#refused = undefined;
      return -ERRNO[err.errno];
    }
  }
}
