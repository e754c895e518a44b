/** File attributes: from a backing stat, for virtual files, and their encoding into entry/attr replies. */
import { ATTR, type Attr, ATTR_OUT, encode, ENTRY_OUT } from "../abi/fuse.ts";
import type { Stat } from "../sys/libc.ts";

/** File type bits of st_mode. */
export const S = {
  IFMT: 0o170000,
  IFDIR: 0o040000,
  IFREG: 0o100000,
  IFLNK: 0o120000,
  ISGID: 0o2000,
} as const;

/** Directory entry types (DT_*) by file type bits. */
export function direntType(mode: number): number {
  return (mode & S.IFMT) >> 12;
}

/** The attributes of a backing file. */
export function fromStat(st: Stat): Attr {
  return {
    ino: st.ino,
    size: st.size,
    blocks: st.blocks,
    atime: st.atime,
    mtime: st.mtime,
    ctime: st.ctime,
    atimensec: st.atimensec,
    mtimensec: st.mtimensec,
    ctimensec: st.ctimensec,
    mode: st.mode,
    nlink: st.nlink,
    uid: st.uid,
    gid: st.gid,
    rdev: st.rdev,
    blksize: st.blksize,
    flags: 0,
  };
}

/** A stable synthetic inode number for a virtual path (FNV-1a, above backing inode ranges). */
export function virtualIno(path: string): number {
  if (path === "") return 1;
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    h ^= path.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return 2 ** 48 + h;
}

/** Attributes of a virtual file: `mode` includes the type bits; times are `time` (unix seconds). */
export function virtualAttr(
  path: string,
  options: { mode: number; size: number; uid?: number; gid?: number; time: number; nlink?: number },
): Attr {
  const sec = Math.floor(options.time);
  const nsec = Math.floor((options.time - sec) * 1e9);
  return {
    ino: virtualIno(path),
    size: options.size,
    blocks: Math.ceil(options.size / 512),
    atime: sec,
    mtime: sec,
    ctime: sec,
    atimensec: nsec,
    mtimensec: nsec,
    ctimensec: nsec,
    mode: options.mode,
    nlink: options.nlink ?? 1,
    uid: options.uid ?? 0,
    gid: options.gid ?? 0,
    rdev: 0,
    blksize: 65536,
    flags: 0,
  };
}

function split(seconds: number): [number, number] {
  const s = Math.floor(seconds);
  return [s, Math.round((seconds - s) * 1e9)];
}

const views = new WeakMap<ArrayBuffer, DataView>();
function viewOf(out: Uint8Array): [DataView, number] {
  const buf = out.buffer as ArrayBuffer;
  let v = views.get(buf);
  if (!v) {
    v = new DataView(buf);
    views.set(buf, v);
  }
  return [v, out.byteOffset];
}

/** Writes a `fuse_entry_out` into `out`; returns its length (128). */
export function putEntry(
  out: Uint8Array,
  options: { nodeid: number; attr: Attr; ttl: number },
): number {
  const [v, at] = viewOf(out);
  const [s, ns] = split(options.ttl);
  encode(ENTRY_OUT, v, at, {
    nodeid: options.nodeid,
    generation: 0,
    entry_valid: s,
    attr_valid: s,
    entry_valid_nsec: ns,
    attr_valid_nsec: ns,
  });
  encode(ATTR, v, at + ENTRY_OUT.size, options.attr);
  return ENTRY_OUT.size + ATTR.size;
}

/** Writes a `fuse_attr_out` into `out`; returns its length (104). */
export function putAttr(out: Uint8Array, options: { attr: Attr; ttl: number }): number {
  const [v, at] = viewOf(out);
  const [s, ns] = split(options.ttl);
  encode(ATTR_OUT, v, at, { attr_valid: s, attr_valid_nsec: ns });
  encode(ATTR, v, at + ATTR_OUT.size, options.attr);
  return ATTR_OUT.size + ATTR.size;
}

/** A DataView over `out` and the offset where `out` starts in it. */
export function outView(out: Uint8Array): [DataView, number] {
  return viewOf(out);
}
