/** A whole-tree snapshot (type, mode, owner, size, mtime, bytes or link target) for "nothing changed". */

/** One entry of a snapshot. */
export interface Entry {
  type: "file" | "dir" | "symlink" | "other";
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  /** File bytes as text (small trees only), or the symlink target. */
  data?: string;
}

/** Every entry below `dir` keyed by relative path ("" is `dir` itself). */
export function snapshot(dir: string): Record<string, Entry> {
  const out: Record<string, Entry> = {};
  const walk = (rel: string) => {
    const path = rel ? `${dir}/${rel}` : dir;
    const st = Deno.lstatSync(path);
    const e: Entry = {
      type: st.isSymlink ? "symlink" : st.isDirectory ? "dir" : st.isFile ? "file" : "other",
      mode: (st.mode ?? 0) & 0o7777,
      uid: st.uid ?? -1,
      gid: st.gid ?? -1,
      mtime: st.mtime?.getTime() ?? 0,
    };
    if (st.isSymlink) e.data = Deno.readLinkSync(path);
    else if (st.isFile) e.data = Deno.readTextFileSync(path);
    out[rel] = e;
    if (st.isDirectory) {
      for (const c of [...Deno.readDirSync(path)].map((x) => x.name).sort()) {
        walk(rel ? `${rel}/${c}` : c);
      }
    }
  };
  walk("");
  return out;
}

/** The sorted names in a directory. */
export function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}
