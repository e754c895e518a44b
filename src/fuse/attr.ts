/** File attributes: from a backing stat, for virtual files, and their encoding into entry/attr replies. */
import { ATTR, type Attr, ATTR_OUT, encode, ENTRY_OUT } from "../abi/fuse.ts";
import { type Stat, statBytes } from "../sys/libc.ts";

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

/**
 * The attributes of a backing file: a new object, or `into` overwritten (no allocation: a stat's
 * times and inode numbers are doubles, boxed when stored in a new object).
 */
export function fromStat(st: Stat, into?: Attr): Attr {
  if (into !== undefined) {
    into.ino = st.ino;
    into.size = st.size;
    into.blocks = st.blocks;
    into.atime = st.atime;
    into.mtime = st.mtime;
    into.ctime = st.ctime;
    into.atimensec = st.atimensec;
    into.mtimensec = st.mtimensec;
    into.ctimensec = st.ctimensec;
    into.mode = st.mode;
    into.nlink = st.nlink;
    into.uid = st.uid;
    into.gid = st.gid;
    into.rdev = st.rdev;
    into.blksize = st.blksize;
    into.flags = 0;
    return into;
  }
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

const views = new WeakMap<ArrayBuffer, DataView>();
// The last buffer asked for: every reply goes to the connection's one reply area, so the WeakMap
// (an identity hash per call) is consulted only when another buffer comes.
let lastBuf: ArrayBuffer | undefined;
let lastView: DataView | undefined;
function viewOf(out: Uint8Array): DataView {
  const buf = out.buffer as ArrayBuffer;
  if (buf === lastBuf) return lastView as DataView;
  let v = views.get(buf);
  if (!v) {
    v = new DataView(buf);
    views.set(buf, v);
  }
  lastBuf = buf;
  lastView = v;
  return v;
}

/** Writes a timeout of `ttl` seconds as the u64 seconds at `at` and the u32 nanoseconds at `nsecAt`. */
function putValid(v: DataView, at: number, nsecAt: number, ttl: number): void {
  const s = Math.floor(ttl);
  v.setUint32(at, s >>> 0, true);
  v.setUint32(at + 4, 0, true);
  v.setUint32(nsecAt, Math.round((ttl - s) * 1e9), true);
}

/** Writes a `fuse_entry_out` into `out`; returns its length (128). */
export function putEntry(
  out: Uint8Array,
  options: { nodeid: number; attr: Attr; ttl: number },
): number {
  const v = viewOf(out);
  const at = out.byteOffset;
  const id = options.nodeid;
  v.setUint32(at, id >>> 0, true); // nodeid
  v.setUint32(at + 4, (id / 0x1_0000_0000) >>> 0, true);
  v.setBigUint64(at + 8, 0n, true); // generation: node ids are never reused
  putValid(v, at + 16, at + 32, options.ttl); // entry_valid, entry_valid_nsec
  putValid(v, at + 24, at + 36, options.ttl); // attr_valid, attr_valid_nsec
  encode(ATTR, v, at + ENTRY_OUT.size, options.attr);
  return ENTRY_OUT.size + ATTR.size;
}

/** Writes a `fuse_attr_out` into `out`; returns its length (104). */
export function putAttr(out: Uint8Array, options: { attr: Attr; ttl: number }): number {
  const v = viewOf(out);
  const at = out.byteOffset;
  putValid(v, at, at + 8, options.ttl); // attr_valid, attr_valid_nsec
  v.setUint32(at + 12, 0, true); // dummy
  encode(ATTR, v, at + ATTR_OUT.size, options.attr);
  return ATTR_OUT.size + ATTR.size;
}

/** A DataView over `out` and the offset where `out` starts in it. */
export function outView(out: Uint8Array): [DataView, number] {
  return [viewOf(out), out.byteOffset];
}

// --- straight from the stat buffer (src/sys/libc.ts statAtRaw) ----------------------------------

const RAW = statBytes.view;
const L = statBytes.layout;
function word(o: number): number {
  return RAW.getUint32(o, true);
}
function u64(o: number): number {
  return word(o) + word(o + 4) * 0x1_0000_0000;
}
/** The inode number, device, link count and mode of the stat in the buffer. */
export const rawStat = {
  ino: () => u64(L.ino),
  dev: () => u64(L.dev),
  nlink: () => word(L.nlink), // the low word: a u32 on the wire
  mode: () => word(L.mode),
};

/**
 * Writes the `fuse_attr` of the stat in the buffer at `at` of `v`: each field's bytes copied (the
 * 64-bit ones whole, the nanoseconds, nlink, rdev and blksize as their low 32 bits, as the
 * encoder would write them), no number decoded or boxed. flags 0.
 */
function putStatAttr(v: DataView, at: number): void {
  const copy = (to: number, from: number) => v.setUint32(to, word(from), true);
  copy(at, L.ino);
  copy(at + 4, L.ino + 4);
  copy(at + 8, L.size_);
  copy(at + 12, L.size_ + 4);
  copy(at + 16, L.blocks);
  copy(at + 20, L.blocks + 4);
  copy(at + 24, L.atime);
  copy(at + 28, L.atime + 4);
  copy(at + 32, L.mtime);
  copy(at + 36, L.mtime + 4);
  copy(at + 40, L.ctime);
  copy(at + 44, L.ctime + 4);
  copy(at + 48, L.atime + 8);
  copy(at + 52, L.mtime + 8);
  copy(at + 56, L.ctime + 8);
  copy(at + 60, L.mode);
  copy(at + 64, L.nlink);
  copy(at + 68, L.uid);
  copy(at + 72, L.gid);
  copy(at + 76, L.rdev);
  copy(at + 80, L.blksize);
  v.setUint32(at + 84, 0, true);
}

/** {@link putEntry} with the attributes of the stat in the buffer. */
export function putRawEntry(out: Uint8Array, nodeid: number, ttl: number): number {
  const v = viewOf(out);
  const at = out.byteOffset;
  v.setUint32(at, nodeid >>> 0, true);
  v.setUint32(at + 4, (nodeid / 0x1_0000_0000) >>> 0, true);
  v.setBigUint64(at + 8, 0n, true);
  putValid(v, at + 16, at + 32, ttl);
  putValid(v, at + 24, at + 36, ttl);
  putStatAttr(v, at + ENTRY_OUT.size);
  return ENTRY_OUT.size + ATTR.size;
}

/** {@link putAttr} with the attributes of the stat in the buffer. */
export function putRawAttr(out: Uint8Array, ttl: number): number {
  const v = viewOf(out);
  const at = out.byteOffset;
  putValid(v, at, at + 8, ttl);
  v.setUint32(at + 12, 0, true);
  putStatAttr(v, at + ATTR_OUT.size);
  return ATTR_OUT.size + ATTR.size;
}
