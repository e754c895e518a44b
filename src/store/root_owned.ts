/** Migration 3 `root-owned-definitions`: every definition under agent/ tool/ model/ bin/ becomes the tree owner's (root's), with canonical modes. */
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  lchownSync,
  openSync,
  readSync,
} from "node:fs";
import { CtxError, toCtxError } from "../abi/errno.ts";
import { replaceFile } from "./atomic.ts";
import type { TreeContext } from "./tree.ts";

/** The system-tier subtrees: definitions that only root writes, and only through the control rules. */
export const DEFINITION_ROOTS = ["agent", "tool", "model", "bin"] as const;

/** Mode of every definition directory. */
export const DIR_MODE = 0o755;

/**
 * Mode of a definition file: its permission bits without set-id, sticky, group or other write
 * (0644 and 0755 stay, 0666 becomes 0644, 04777 becomes 0755, 0555 stays).
 */
export function fileMode(mode: number): number {
  return mode & 0o755;
}

const DIR_OPEN = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE_OPEN = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Who the definitions belong to: root (the tree's owner; a development tree's caller). */
function owner(): { uid: number; gid: number } {
  return { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0 };
}

/**
 * Takes the directory `path` over through its descriptor: owner, then mode. From then on nobody
 * else can add, rename or remove entries in it, so the walk below it meets only what it lists.
 */
function takeDir(path: string, to: { uid: number; gid: number }): void {
  const fd = openSync(path, DIR_OPEN);
  try {
    const st = fstatSync(fd);
    if (st.uid !== to.uid || st.gid !== to.gid) fchownSync(fd, to.uid, to.gid);
    if ((fstatSync(fd).mode & 0o7777) !== DIR_MODE) fchmodSync(fd, DIR_MODE);
  } finally {
    closeSync(fd);
  }
}

/** The bytes of the regular file `path` (never through a symlink), with its mode and link count. */
function readFile(path: string): { bytes: Uint8Array; mode: number; nlink: number } {
  const fd = openSync(path, FILE_OPEN);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new CtxError("EINVAL", "not a regular file", { path });
    const bytes = new Uint8Array(st.size);
    let off = 0;
    while (off < bytes.length) {
      const n = readSync(fd, bytes, off, bytes.length - off, null);
      if (n === 0) throw new CtxError("EIO", "the file shrank while it was read", { path });
      off += n;
    }
    return { bytes, mode: st.mode & 0o7777, nlink: st.nlink };
  } finally {
    closeSync(fd);
  }
}

/**
 * A file that is not exactly the owner's, with the canonical mode and one link, is replaced by a
 * fresh copy (temp + rename in the now root-only directory): a chown in place would leave working
 * any write descriptor its old owner still holds, and a chmod in place would change every other
 * name of a hard-linked inode.
 */
function takeFile(path: string, st: Deno.FileInfo, to: { uid: number; gid: number }): void {
  const mode = (st.mode ?? 0) & 0o7777;
  if (st.uid === to.uid && st.gid === to.gid && mode === fileMode(mode) && st.nlink === 1) return;
  const f = readFile(path);
  replaceFile(path, f.bytes, { mode: fileMode(f.mode), ...to });
}

function walk(path: string, to: { uid: number; gid: number }): void {
  try {
    takeDir(path, to);
  } catch (e) {
    throw toCtxError(e, path);
  }
  for (const e of Deno.readDirSync(path)) {
    const p = `${path}/${e.name}`;
    try {
      const st = Deno.lstatSync(p);
      if (st.isDirectory) walk(p, to);
      else if (st.isFile) takeFile(p, st, to);
      else if (!st.isSymlink) {
        throw new CtxError("EINVAL", "a definition must be a file, a directory or a symlink");
      } else if (st.uid !== to.uid || st.gid !== to.gid) lchownSync(p, to.uid, to.gid);
    } catch (err) {
      const c = toCtxError(err, p);
      throw c.path ? c : new CtxError(c.errno, c.message, { path: p, cause: err });
    }
  }
}

/**
 * Makes every entry under `agent/`, `tool/`, `model/` and `bin/` of the generation `dir` the
 * tree owner's (root's): directories 0755, files without set-id bits or group/other write
 * ({@link fileMode}), symlinks re-owned. Runs top-down, each directory taken over before its entries are looked at, so a user
 * who owned part of an old tree cannot swap anything in meanwhile. Who owns an agent stays what
 * its `owner` control says; homes under `home/<uid>/` are untouched.
 */
export function rootOwnDefinitions(dir: string, _ctx: TreeContext): void {
  const to = owner();
  for (const top of DEFINITION_ROOTS) {
    const path = `${dir}/${top}`;
    try {
      Deno.lstatSync(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) continue;
      throw toCtxError(e, path);
    }
    walk(path, to);
  }
}
