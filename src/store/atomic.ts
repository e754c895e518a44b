/** The one atomic-replace helper: temp file in the same directory, fsync, rename, directory fsync. */
import { CtxError, toCtxError } from "../abi/errno.ts";

/** Options for {@link replaceFile}. */
export interface ReplaceOptions {
  /** File mode; default: the existing file's mode, else 0o644. */
  mode?: number;
  /** Owner; default: the existing file's owner, else the caller. */
  uid?: number;
  gid?: number;
}

function dirOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? (i === 0 ? "/" : ".") : path.slice(0, i);
}

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
  try {
    const f = Deno.openSync(tmp, { write: true, createNew: true, mode: mode ?? 0o644 });
    try {
      let off = 0;
      while (off < bytes.length) off += f.writeSync(bytes.subarray(off));
      f.syncSync();
    } finally {
      f.close();
    }
    if (mode !== undefined) Deno.chmodSync(tmp, mode); // umask must not narrow a preserved mode
    if (uid !== undefined && gid !== undefined && (uid !== Deno.uid() || gid !== Deno.gid())) {
      Deno.chownSync(tmp, uid, gid);
    }
    Deno.renameSync(tmp, path);
    syncDir(dirOf(path));
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
