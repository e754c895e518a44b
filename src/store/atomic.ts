/** The one atomic-replace helper: temp file in the same directory, fsync, rename, directory fsync. */
import { CtxError, errnoName, toCtxError } from "../abi/errno.ts";
import { tempName } from "../abi/names.ts";
import {
  canWriteNew,
  closeFd,
  createNew,
  openDirectory,
  syncClose,
  syncDirectory,
  writeNew,
} from "../sys/newfile.ts";

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

function baseOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/**
 * fsyncs a directory so a rename or create inside it is durable. With FFI the open is
 * O_DIRECTORY|O_NONBLOCK: a FIFO swapped in for a user's directory cannot block the daemon.
 */
export function syncDir(dir: string): void {
  if (canWriteNew()) {
    const err = syncDirectory(dir);
    if (err < 0) throw new CtxError(errnoName(-err), "cannot fsync the directory", { path: dir });
    return;
  }
  const f = Deno.openSync(dir, { read: true });
  try {
    f.syncSync();
  } finally {
    f.close();
  }
}

/** A temp name beside `path` that other writers and readers never collide with. */
export function tempPath(path: string): string {
  return `${dirOf(path)}/${tempName(baseOf(path))}`;
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
    if (canWriteNew()) {
      // With FFI (cortexfsd, ctx): owner and mode are set on the descriptor, never by path.
      const uidGid = uid !== undefined && gid !== undefined ? { uid, gid } : {};
      const err = writeNew(tmp, bytes, { mode: mode ?? 0o644, ...uidGid, sync });
      if (err < 0) throw new CtxError(errnoName(-err), `cannot write ${tmp}`, { path });
      Deno.renameSync(tmp, path);
      if (sync) syncDir(dirOf(path));
      return;
    }
    // createNew is O_CREAT|O_EXCL: it never follows a symlink, and the file is the one created here.
    const f = Deno.openSync(tmp, { write: true, createNew: true, mode: mode ?? 0o644 });
    try {
      let off = 0;
      while (off < bytes.length) off += f.writeSync(bytes.subarray(off));
      fixup(tmp, f.statSync(), { mode, uid, gid });
      if (sync) f.syncSync();
    } finally {
      f.close();
    }
    Deno.renameSync(tmp, path);
    if (sync) syncDir(dirOf(path));
  } catch (e) {
    try {
      Deno.removeSync(tmp);
    } catch { /* any kind: cleanup on the way out, the real error is thrown next */ }
    throw e instanceof CtxError ? e : toCtxError(e, path);
  }
}

/**
 * Replaces several files of the directory `dir` together, as {@link replaceFile} does each (temp
 * written through one fd, fsynced, renamed, then one directory fsync), with the fsyncs off the JS
 * thread: all temps are fsynced at once on worker threads, then renamed in the order given, then
 * the directory is fsynced. Each file is whole at every instant (old or new); resolves once all
 * are durable. `act` runs each step that resolves a name (create, rename, unlink, opening `dir`),
 * never across an await: the caller's filesystem identity (setfsuid is per thread) applies to it.
 * `renamed` is called once the new files are in place (readers see them), before the directory's
 * fsync. Without FFI (tsh) it is the same sequence on the JS thread.
 */
export async function replaceFilesSoon(
  dir: string,
  files: Record<string, string>,
  options: { mode: number; act?: <T>(fn: () => T) => T; renamed?: () => void },
): Promise<void> {
  const act = options.act ?? ((fn) => fn());
  if (!canWriteNew()) {
    act(() => {
      for (const [name, text] of Object.entries(files)) {
        replaceFile(`${dir}/${name}`, text, { mode: options.mode });
      }
    });
    options.renamed?.();
    return;
  }
  const enc = new TextEncoder();
  const staged: { tmp: string; path: string; fd: number }[] = [];
  const unstage = () =>
    act(() => {
      for (const { tmp } of staged) {
        try {
          Deno.removeSync(tmp);
        } catch { /* any kind: cleanup after a failure, which its caller throws */ }
      }
    });
  try {
    act(() => {
      for (const [name, text] of Object.entries(files)) {
        const path = `${dir}/${name}`;
        const tmp = tempPath(path);
        const fd = createNew(tmp, enc.encode(text), { mode: options.mode });
        if (fd < 0) throw new CtxError(errnoName(-fd), `cannot write ${tmp}`, { path });
        staged.push({ tmp, path, fd });
      }
    });
  } catch (e) {
    for (const { fd } of staged) closeFd(fd);
    unstage();
    throw e;
  }
  const synced = await Promise.all(staged.map(({ fd }) => syncClose(fd)));
  if (synced.some((r) => r < 0)) {
    unstage();
    throw new CtxError("EIO", "fsync failed", { path: dir });
  }
  let dfd = -1;
  try {
    act(() => {
      for (const { tmp, path } of staged) Deno.renameSync(tmp, path);
      dfd = openDirectory(dir);
    });
  } catch (e) {
    unstage();
    throw toCtxError(e, dir);
  }
  options.renamed?.();
  if (dfd < 0) throw new CtxError(errnoName(-dfd), "cannot fsync the directory", { path: dir });
  if (await syncClose(dfd) < 0) {
    throw new CtxError("EIO", "cannot fsync the directory", { path: dir });
  }
}

/**
 * Without FFI (tsh): gives the new temp file the owner and mode asked for, when creating it did not
 * already (a umask narrowed the mode, or the file must belong to someone else). Usually nothing is
 * left to do, and nothing loads node:fs (~50 ms at every tsh start). Deno has no fchmod/fchown, so this
 * works by path, which is only sound where nobody else can swap the name: acting as root, it does
 * so only in a root-owned directory not writable by group or others, after checking the name is
 * still the file it created; anything else fails closed (EPERM).
 */
function fixup(
  tmp: string,
  st: Deno.FileInfo,
  want: { mode?: number; uid?: number; gid?: number },
): void {
  const chown = want.uid !== undefined && want.gid !== undefined &&
    (st.uid !== want.uid || st.gid !== want.gid);
  const chmod = want.mode !== undefined && ((st.mode ?? 0) & 0o7777) !== want.mode;
  if (!chown && !chmod) return;
  // A temp created by uid 0 means this thread acts with root's filesystem identity (under
  // asUser the file belongs to that user, and a by-path change can only reach the user's own).
  if (st.uid === 0) {
    const dir = Deno.lstatSync(dirOf(tmp));
    const safe = dir.isDirectory && (dir.uid === 0) && ((dir.mode ?? 0) & 0o022) === 0;
    const same = Deno.lstatSync(tmp);
    if (!safe || !same.isFile || same.ino !== st.ino || same.dev !== st.dev) {
      throw new CtxError(
        "EPERM",
        `refusing to set owner/mode as root in ${dirOf(tmp)}: others can write there`,
        { path: tmp },
      );
    }
  }
  if (chown) Deno.chownSync(tmp, want.uid!, want.gid!); // both checked defined above
  if (want.mode !== undefined && (chmod || chown)) Deno.chmodSync(tmp, want.mode); // chown clears set-id
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
