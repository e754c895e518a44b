/** Copies a generation tree preserving modes, owners, symlinks and times; every file is fsynced. */
import { lchownSync, lutimesSync } from "node:fs";
import { toCtxError } from "../abi/errno.ts";
import { syncDir } from "./atomic.ts";
import { TEMP_NAME } from "./validate.ts";

/** Options for {@link cloneTree}. */
export interface CloneOptions {
  /** Called after each top-level entry is copied (the update's test hook uses the first call). */
  onEntry?: (name: string) => void;
}

// ABI-managed subtrees: interrupted control writes there are debris, not data. Under home/ and
// shared/ every file is user data and is copied whatever its name.
const MANAGED = new Set(["agent", "tool", "model", "bin"]);

const asRoot = Deno.uid() === 0;

function own(path: string, st: Deno.FileInfo): void {
  if (st.uid === null || st.gid === null) return;
  if (!asRoot && st.uid === Deno.uid() && st.gid === Deno.gid()) return;
  lchownSync(path, st.uid, st.gid);
}

function times(path: string, st: Deno.FileInfo): void {
  if (st.atime && st.mtime) lutimesSync(path, st.atime, st.mtime);
}

function copyEntry(src: string, dst: string, skipTemps: boolean): void {
  const st = Deno.lstatSync(src);
  if (st.isSymlink) {
    Deno.symlinkSync(Deno.readLinkSync(src), dst);
    own(dst, st);
    times(dst, st);
  } else if (st.isDirectory) {
    Deno.mkdirSync(dst, { mode: 0o700 });
    for (const e of Deno.readDirSync(src)) {
      if (skipTemps && TEMP_NAME.test(e.name)) continue;
      copyEntry(`${src}/${e.name}`, `${dst}/${e.name}`, skipTemps);
    }
    own(dst, st);
    Deno.chmodSync(dst, (st.mode ?? 0o755) & 0o7777);
    syncDir(dst);
    times(dst, st);
  } else if (st.isFile) {
    Deno.copyFileSync(src, dst);
    const f = Deno.openSync(dst, { read: true, write: true });
    try {
      f.syncSync();
    } finally {
      f.close();
    }
    own(dst, st);
    Deno.chmodSync(dst, (st.mode ?? 0o644) & 0o7777); // after chown, which clears set-id bits
    times(dst, st);
  }
  // Sockets, FIFOs and devices belong to live processes of the old generation: not cloned.
}

/** Copies the contents of directory `src` into the existing empty directory `dst`. */
export function cloneTree(src: string, dst: string, options: CloneOptions = {}): void {
  let names: string[];
  try {
    names = [...Deno.readDirSync(src)].map((e) => e.name).sort();
  } catch (e) {
    throw toCtxError(e, src);
  }
  for (const name of names) {
    try {
      copyEntry(`${src}/${name}`, `${dst}/${name}`, MANAGED.has(name));
    } catch (e) {
      throw toCtxError(e, `${src}/${name}`);
    }
    options.onEntry?.(name);
  }
  const st = Deno.lstatSync(src);
  own(dst, st);
  Deno.chmodSync(dst, (st.mode ?? 0o755) & 0o7777);
  syncDir(dst);
}
