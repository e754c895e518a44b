/** Opens a tool executable without following a symlink and reads its head: a symlinked tool is refused. */
import { CtxError, toCtxError } from "../abi/errno.ts";

/** What the open saw. */
export interface Opened {
  /** Mode, owner and size from fstat of the opened descriptor (not of the path). */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** The first bytes (up to 4 KiB) as text: enough for the object-runner metadata. */
  head: string;
}

/**
 * Opens `path` refusing symlinks: lstat must show a regular file, and fstat of the opened
 * descriptor must show that same inode (dev+ino), so a symlink swapped in between is refused too.
 * (Deno's node:fs honours O_NOFOLLOW only under --allow-all, and tsh runs with a narrow
 * permission set; the identity check gives the same guarantee without FFI.)
 */
export function openNoFollow(path: string): Opened {
  let l: Deno.FileInfo;
  try {
    l = Deno.lstatSync(path);
  } catch (e) {
    throw toCtxError(e, path);
  }
  if (l.isSymlink) throw new CtxError("EACCES", "tool executable is a symlink (refused)", { path });
  if (!l.isFile) throw new CtxError("EACCES", "tool executable is not a regular file", { path });
  let f: Deno.FsFile;
  try {
    f = Deno.openSync(path, { read: true });
  } catch (e) {
    throw toCtxError(e, path);
  }
  try {
    const st = f.statSync();
    if (st.dev !== l.dev || st.ino !== l.ino || !st.isFile) {
      throw new CtxError("EACCES", "tool executable changed while it was opened (refused)", {
        path,
      });
    }
    const buf = new Uint8Array(Math.min(4096, st.size));
    let n = 0;
    while (n < buf.length) {
      const r = f.readSync(buf.subarray(n));
      if (r === null) break;
      n += r;
    }
    return {
      mode: (st.mode ?? 0) & 0o7777,
      uid: st.uid ?? -1,
      gid: st.gid ?? -1,
      size: st.size,
      head: new TextDecoder().decode(buf.subarray(0, n)),
    };
  } finally {
    f.close();
  }
}

/** The built-in named by object-runner metadata (`#!/usr/bin/cortexfs-object-runner` + `builtin=`). */
export function builtinOf(head: string): string | undefined {
  if (!head.startsWith("#!/usr/bin/cortexfs-object-runner\n")) return undefined;
  const m = /^builtin=(.+)$/m.exec(head);
  return m?.[1];
}
