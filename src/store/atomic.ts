/** The one atomic-replace helper: temp file in the same directory, fsync, rename, directory fsync. */
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  openSync,
  writeSync,
} from "node:fs";
import { CtxError, toCtxError } from "../abi/errno.ts";

/** Options for {@link replaceFile}. */
export interface ReplaceOptions {
  /** File mode; default: the existing file's mode, else 0o644. */
  mode?: number;
  /** Owner; default: the existing file's owner, else the caller. */
  uid?: number;
  gid?: number;
  /**
   * fsync the file and its directory (default true). Only dynamic summaries that the next start
   * rewrites anyway (an agent's `status`/`pid`) pass false.
   */
  sync?: boolean;
}

function dirOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? (i === 0 ? "/" : ".") : path.slice(0, i);
}

/** A new file, never through a symlink, not inherited by children. */
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

function baseOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** fsyncs a directory so a rename or create inside it is durable. */
export function syncDir(dir: string): void {
  const f = Deno.openSync(dir, { read: true });
  try {
    f.syncSync();
  } finally {
    f.close();
  }
}

/** A temp name beside `path` that other writers and readers never collide with. */
export function tempPath(path: string): string {
  const nonce = crypto.getRandomValues(new Uint32Array(1))[0].toString(16);
  return `${dirOf(path)}/.${baseOf(path)}.tmp-${Deno.pid}-${nonce}`;
}

/**
 * Replaces `path` with `data` atomically: a reader sees the old bytes or the new bytes, never a
 * mix, and after a crash at any point the file is whole (old or new).
 */
export function replaceFile(
  path: string,
  data: Uint8Array | string,
  options: ReplaceOptions = {},
): void {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let mode = options.mode, uid = options.uid, gid = options.gid;
  if (mode === undefined || uid === undefined || gid === undefined) {
    try {
      const st = Deno.lstatSync(path);
      mode ??= (st.mode ?? 0o644) & 0o7777;
      uid ??= st.uid ?? undefined;
      gid ??= st.gid ?? undefined;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, path);
    }
  }
  const tmp = tempPath(path);
  const sync = options.sync ?? true;
  try {
    // Mode and owner are set through the open descriptor (fchmod/fchown), never by path: the
    // directory may be writable by someone else (a user's home), who could swap the temp name for
    // a symlink between the create and a chmod/chown by path and have root change another file.
    // O_EXCL never follows a symlink, and the fd is the file this call created.
    const fd = openSync(tmp, CREATE, mode ?? 0o644);
    try {
      let off = 0;
      while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
      const st = fstatSync(fd);
      if (uid !== undefined && gid !== undefined && (st.uid !== uid || st.gid !== gid)) {
        fchownSync(fd, uid, gid); // before the chmod: a chown clears set-id bits
      }
      // the umask must not narrow a preserved mode
      if (mode !== undefined && (fstatSync(fd).mode & 0o7777) !== mode) fchmodSync(fd, mode);
      if (sync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    Deno.renameSync(tmp, path);
    if (sync) syncDir(dirOf(path));
  } catch (e) {
    try {
      Deno.removeSync(tmp);
    } catch { /* already renamed or never created */ }
    throw e instanceof CtxError ? e : toCtxError(e, path);
  }
}

/** Creates `dir` (and parents) and fsyncs the parent of each created level. */
export function ensureDir(dir: string, mode = 0o755): void {
  try {
    if (Deno.statSync(dir).isDirectory) return;
    throw new CtxError("ENOTDIR", "not a directory", { path: dir });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, dir);
  }
  const parent = dirOf(dir);
  if (parent !== dir) ensureDir(parent, mode);
  try {
    Deno.mkdirSync(dir, { mode });
    Deno.chmodSync(dir, mode);
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw toCtxError(e, dir);
  }
  syncDir(parent);
}
