/** Opens a tool executable without following a symlink (and holds it for exec by descriptor): a symlinked tool is refused. */
import { CtxError, toCtxError } from "../abi/errno.ts";

/** What the open saw. */
export interface Opened {
  /** Mode, owner and size from fstat of the opened descriptor (not of the path). */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** The inode identity, so a later open can prove it holds the very file that was checked. */
  dev: number;
  ino: number;
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
      dev: st.dev,
      ino: st.ino ?? -1,
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

/** An executable held open by descriptor: exec `path` and the kernel runs exactly this inode. */
export interface Held {
  /** The descriptor (a real fd of this process, from node:fs). */
  fd: number;
  /** `/proc/<our pid>/fd/<fd>`: exec'ing it runs the held inode, whatever the name now points to. */
  path: string;
  /** Closes the descriptor: call it only after the tool has exited. */
  close(): void;
}

/**
 * Opens `path` again and keeps it open, proving (lstat, then fstat of the descriptor) that it is
 * the regular file `expect` names (dev+ino from the check that authorized it). The tool is then
 * exec'd through `/proc/<pid>/fd/<fd>`, so no later swap of the name (a symlink renamed over a
 * user-tier tool) can change what runs: the check and the exec see one inode. A script's
 * interpreter opens that same /proc path, which stays valid while we hold the descriptor.
 * node:fs is used because Deno.FsFile does not expose its fd; it is loaded only here, on the path
 * of ordinary executables.
 */
export async function holdExecutable(
  path: string,
  expect: { dev: number; ino: number },
): Promise<Held> {
  const fs = await import("node:fs");
  let l: Deno.FileInfo;
  try {
    l = Deno.lstatSync(path);
  } catch (e) {
    throw toCtxError(e, path);
  }
  if (l.isSymlink) throw new CtxError("EACCES", "tool executable is a symlink (refused)", { path });
  const changed = () =>
    new CtxError("EACCES", "tool executable changed after it was authorized (refused)", { path });
  if (!l.isFile || l.dev !== expect.dev || l.ino !== expect.ino) throw changed();
  let fd: number;
  try {
    // O_NOFOLLOW is honoured by Deno only under --allow-all; the identity check below is what
    // refuses a swap. O_NONBLOCK: a FIFO swapped in cannot block the open.
    const c = fs.constants;
    fd = fs.openSync(path, c.O_RDONLY | c.O_NOFOLLOW | c.O_NONBLOCK);
  } catch (e) {
    throw toCtxError(e, path);
  }
  const st = fs.fstatSync(fd);
  if (!st.isFile() || st.dev !== expect.dev || st.ino !== expect.ino) {
    fs.closeSync(fd);
    throw changed();
  }
  return {
    fd,
    path: `/proc/${Deno.pid}/fd/${fd}`,
    close: () => fs.closeSync(fd),
  };
}
