/** FUSE kernel wire structs as field tables, the opcode table and protocol constants (pure data). */

/** A field type of a kernel struct: fixed-width little-endian integers. */
export type FieldType = "u16" | "u32" | "i32" | "u64" | "i64";

/** One struct, declared once as `[name, type]` rows; size, decode and encode derive from it. */
export interface Struct<T extends string> {
  /** Kernel struct name, for messages. */
  name: string;
  /** The rows in wire order. */
  fields: readonly (readonly [T, FieldType])[];
  /** Byte size (sum of the fields: every kernel struct here is already 8-byte padded). */
  size: number;
  /** Byte offset of each field. */
  offsets: Record<T, number>;
  /** Decoder compiled from the rows (see {@link decode}). */
  read: (view: DataView, at: number) => Record<T, number>;
  /** Encoder compiled from the rows (see {@link encode}). */
  write: (view: DataView, at: number, value: Partial<Record<T, number>>) => number;
}

const WIDTH: Record<FieldType, number> = { u16: 2, u32: 4, i32: 4, u64: 8, i64: 8 };
const HI = 0x1_0000_0000;

/**
 * Compiles the field table into straight-line code: one property per field with a literal name,
 * so V8 sees one object shape and no keyed lookups. A request costs a few of these per reply; a
 * loop over the rows with `value[name]` was measured at several times the cost (megamorphic keyed
 * loads and dictionary-mode objects). The generated source only ever contains the table's own
 * field names and numeric offsets.
 */
function compile<T extends string>(
  fields: readonly (readonly [T, FieldType])[],
  offsets: Record<T, number>,
): Pick<Struct<T>, "read" | "write"> {
  const rd: string[] = [];
  const wr: string[] = [];
  for (const [f, t] of fields) {
    if (!/^[a-z_][a-z0-9_]*$/.test(f)) throw new Error(`bad field name ${f}`);
    const o = `at + ${offsets[f]}`;
    const v = `(value.${f} ?? 0)`;
    switch (t) {
      case "u16":
        rd.push(`${f}: view.getUint16(${o}, true)`);
        wr.push(`view.setUint16(${o}, ${v}, true);`);
        break;
      case "u32":
        rd.push(`${f}: view.getUint32(${o}, true)`);
        wr.push(`view.setUint32(${o}, ${v} >>> 0, true);`);
        break;
      case "i32":
        rd.push(`${f}: view.getInt32(${o}, true)`);
        wr.push(`view.setInt32(${o}, ${v}, true);`);
        break;
      case "u64":
        rd.push(`${f}: view.getUint32(${o}, true) + view.getUint32(${o} + 4, true) * ${HI}`);
        wr.push(
          `n = ${v}; if (!(n > 0)) n = 0; view.setUint32(${o}, n >>> 0, true); ` +
            `view.setUint32(${o} + 4, (n / ${HI}) >>> 0, true);`,
        );
        break;
      case "i64":
        // signed seconds (times before 1970): the high word is floor(n / 2^32), two's complement
        rd.push(`${f}: view.getUint32(${o}, true) + view.getInt32(${o} + 4, true) * ${HI}`);
        wr.push(
          `n = ${v}; view.setUint32(${o}, n >>> 0, true); ` +
            `view.setInt32(${o} + 4, Math.floor(n / ${HI}), true);`,
        );
    }
  }
  const size = fields.reduce((n, [, t]) => n + WIDTH[t], 0);
  return {
    read: new Function("view", "at", `return { ${rd.join(", ")} };`) as Struct<T>["read"],
    write: new Function(
      "view",
      "at",
      "value",
      `let n = 0; ${wr.join(" ")} return at + ${size};`,
    ) as Struct<T>["write"],
  };
}

/** Builds a {@link Struct} from its field table. */
export function struct<T extends string>(
  name: string,
  fields: readonly (readonly [T, FieldType])[],
): Struct<T> {
  const offsets = {} as Record<T, number>;
  let size = 0;
  for (const [f, t] of fields) {
    offsets[f] = size;
    size += WIDTH[t];
  }
  return { name, fields, size, offsets, ...compile(fields, offsets) };
}

/**
 * Decodes `s` from `view` at `at`. u64 values become numbers: exact below 2^53, which holds for
 * every u64 this server reads (nodeids, handles and offsets it issued, sizes); lock owners may lose
 * low bits and are only compared for equality (FLUSH of a control: which process closes).
 */
export function decode<T extends string>(
  s: Struct<T>,
  view: DataView,
  at = 0,
): Record<T, number> {
  return s.read(view, at);
}

/** Encodes `value` as `s` into `view` at `at`; missing fields are written as 0. Returns the end offset. */
export function encode<T extends string>(
  s: Struct<T>,
  view: DataView,
  at: number,
  value: Partial<Record<T, number>>,
): number {
  return s.write(view, at, value);
}

// --- structs (include/uapi/linux/fuse.h, protocol 7.40) -------------------------------------

/** `struct fuse_in_header` (40 bytes). */
export const IN_HEADER = struct(
  "fuse_in_header",
  [
    ["len", "u32"],
    ["opcode", "u32"],
    ["unique", "u64"],
    ["nodeid", "u64"],
    ["uid", "u32"],
    ["gid", "u32"],
    ["pid", "u32"],
    ["total_extlen", "u16"],
    ["padding", "u16"],
  ] as const,
);

/** `struct fuse_out_header` (16 bytes). */
export const OUT_HEADER = struct(
  "fuse_out_header",
  [
    ["len", "u32"],
    ["error", "i32"],
    ["unique", "u64"],
  ] as const,
);

/** `struct fuse_attr` (88 bytes). */
export const ATTR = struct(
  "fuse_attr",
  [
    ["ino", "u64"],
    ["size", "u64"],
    ["blocks", "u64"],
    ["atime", "i64"],
    ["mtime", "i64"],
    ["ctime", "i64"],
    ["atimensec", "u32"],
    ["mtimensec", "u32"],
    ["ctimensec", "u32"],
    ["mode", "u32"],
    ["nlink", "u32"],
    ["uid", "u32"],
    ["gid", "u32"],
    ["rdev", "u32"],
    ["blksize", "u32"],
    ["flags", "u32"],
  ] as const,
);

/** The attribute fields every reply carrying a `fuse_attr` fills. */
export type Attr = Record<(typeof ATTR.fields)[number][0], number>;

/** `struct fuse_entry_out` head (40 bytes); a `fuse_attr` follows. */
export const ENTRY_OUT = struct(
  "fuse_entry_out",
  [
    ["nodeid", "u64"],
    ["generation", "u64"],
    ["entry_valid", "u64"],
    ["attr_valid", "u64"],
    ["entry_valid_nsec", "u32"],
    ["attr_valid_nsec", "u32"],
  ] as const,
);

/** `struct fuse_attr_out` head (16 bytes); a `fuse_attr` follows. */
export const ATTR_OUT = struct(
  "fuse_attr_out",
  [
    ["attr_valid", "u64"],
    ["attr_valid_nsec", "u32"],
    ["dummy", "u32"],
  ] as const,
);

/** `struct fuse_forget_in` (8). */
export const FORGET_IN = struct("fuse_forget_in", [["nlookup", "u64"]] as const);
/** `struct fuse_batch_forget_in` (8); `count` `fuse_forget_one` follow. */
export const BATCH_FORGET_IN = struct(
  "fuse_batch_forget_in",
  [
    ["count", "u32"],
    ["dummy", "u32"],
  ] as const,
);
/** `struct fuse_forget_one` (16). */
export const FORGET_ONE = struct(
  "fuse_forget_one",
  [
    ["nodeid", "u64"],
    ["nlookup", "u64"],
  ] as const,
);
/** `struct fuse_getattr_in` (16). */
export const GETATTR_IN = struct(
  "fuse_getattr_in",
  [
    ["getattr_flags", "u32"],
    ["dummy", "u32"],
    ["fh", "u64"],
  ] as const,
);
/** `struct fuse_setattr_in` (88). */
export const SETATTR_IN = struct(
  "fuse_setattr_in",
  [
    ["valid", "u32"],
    ["padding", "u32"],
    ["fh", "u64"],
    ["size", "u64"],
    ["lock_owner", "u64"],
    ["atime", "i64"],
    ["mtime", "i64"],
    ["ctime", "i64"],
    ["atimensec", "u32"],
    ["mtimensec", "u32"],
    ["ctimensec", "u32"],
    ["mode", "u32"],
    ["unused4", "u32"],
    ["uid", "u32"],
    ["gid", "u32"],
    ["unused5", "u32"],
  ] as const,
);
/** `struct fuse_mknod_in` (16); the name follows. */
export const MKNOD_IN = struct(
  "fuse_mknod_in",
  [
    ["mode", "u32"],
    ["rdev", "u32"],
    ["umask", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_mkdir_in` (8); the name follows. */
export const MKDIR_IN = struct("fuse_mkdir_in", [["mode", "u32"], ["umask", "u32"]] as const);
/** `struct fuse_rename_in` (8); two names follow. */
export const RENAME_IN = struct("fuse_rename_in", [["newdir", "u64"]] as const);
/** `struct fuse_rename2_in` (16); two names follow. */
export const RENAME2_IN = struct(
  "fuse_rename2_in",
  [
    ["newdir", "u64"],
    ["flags", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_link_in` (8); the new name follows. */
export const LINK_IN = struct("fuse_link_in", [["oldnodeid", "u64"]] as const);
/** `struct fuse_open_in` (8). */
export const OPEN_IN = struct("fuse_open_in", [["flags", "u32"], ["open_flags", "u32"]] as const);
/** `struct fuse_create_in` (16); the name follows. */
export const CREATE_IN = struct(
  "fuse_create_in",
  [
    ["flags", "u32"],
    ["mode", "u32"],
    ["umask", "u32"],
    ["open_flags", "u32"],
  ] as const,
);
/** `struct fuse_open_out` (16). */
export const OPEN_OUT = struct(
  "fuse_open_out",
  [
    ["fh", "u64"],
    ["open_flags", "u32"],
    ["backing_id", "i32"],
  ] as const,
);
/** `struct fuse_release_in` (24). */
export const RELEASE_IN = struct(
  "fuse_release_in",
  [
    ["fh", "u64"],
    ["flags", "u32"],
    ["release_flags", "u32"],
    ["lock_owner", "u64"],
  ] as const,
);
/** `struct fuse_flush_in` (24). */
export const FLUSH_IN = struct(
  "fuse_flush_in",
  [
    ["fh", "u64"],
    ["unused", "u32"],
    ["padding", "u32"],
    ["lock_owner", "u64"],
  ] as const,
);
/** `struct fuse_read_in` (40); READDIR uses it too. */
export const READ_IN = struct(
  "fuse_read_in",
  [
    ["fh", "u64"],
    ["offset", "u64"],
    ["size", "u32"],
    ["read_flags", "u32"],
    ["lock_owner", "u64"],
    ["flags", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_write_in` (40); the data follows. */
export const WRITE_IN = struct(
  "fuse_write_in",
  [
    ["fh", "u64"],
    ["offset", "u64"],
    ["size", "u32"],
    ["write_flags", "u32"],
    ["lock_owner", "u64"],
    ["flags", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_write_out` (8). */
export const WRITE_OUT = struct("fuse_write_out", [["size", "u32"], ["padding", "u32"]] as const);
/** `struct fuse_statfs_out` = `struct fuse_kstatfs` (80). */
export const STATFS_OUT = struct(
  "fuse_kstatfs",
  [
    ["blocks", "u64"],
    ["bfree", "u64"],
    ["bavail", "u64"],
    ["files", "u64"],
    ["ffree", "u64"],
    ["bsize", "u32"],
    ["namelen", "u32"],
    ["frsize", "u32"],
    ["padding", "u32"],
    ["spare0", "u32"],
    ["spare1", "u32"],
    ["spare2", "u32"],
    ["spare3", "u32"],
    ["spare4", "u32"],
    ["spare5", "u32"],
  ] as const,
);
/** `struct fuse_fsync_in` (16); FSYNCDIR uses it too. */
export const FSYNC_IN = struct(
  "fuse_fsync_in",
  [
    ["fh", "u64"],
    ["fsync_flags", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_fallocate_in` (32). */
export const FALLOCATE_IN = struct(
  "fuse_fallocate_in",
  [
    ["fh", "u64"],
    ["offset", "u64"],
    ["length", "u64"],
    ["mode", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_lseek_in` (24): only SEEK_DATA and SEEK_HOLE reach the server. */
export const LSEEK_IN = struct(
  "fuse_lseek_in",
  [
    ["fh", "u64"],
    ["offset", "u64"],
    ["whence", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_lseek_out` (8). */
export const LSEEK_OUT = struct("fuse_lseek_out", [["offset", "u64"]] as const);
/** `struct fuse_getxattr_in` (8); the name follows. LISTXATTR uses it too. */
export const GETXATTR_IN = struct(
  "fuse_getxattr_in",
  [["size", "u32"], ["padding", "u32"]] as const,
);
/**
 * `struct fuse_setxattr_in` (8); the name and then the value follow. The 16-byte form with
 * `setxattr_flags` comes only with FUSE_SETXATTR_EXT, which this server does not ask for.
 */
export const SETXATTR_IN = struct(
  "fuse_setxattr_in",
  [["size", "u32"], ["flags", "u32"]] as const,
);
/** `struct fuse_getxattr_out` (8): the size needed when the request asked with size 0. */
export const GETXATTR_OUT = struct(
  "fuse_getxattr_out",
  [
    ["size", "u32"],
    ["padding", "u32"],
  ] as const,
);
/** `struct fuse_access_in` (8). */
export const ACCESS_IN = struct("fuse_access_in", [["mask", "u32"], ["padding", "u32"]] as const);
/** `struct fuse_interrupt_in` (8). */
export const INTERRUPT_IN = struct("fuse_interrupt_in", [["unique", "u64"]] as const);

const unused = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => [`${prefix}${i}`, "u32"] as const);

/** `struct fuse_init_in` (64). */
export const INIT_IN = struct(
  "fuse_init_in",
  [
    ["major", "u32"],
    ["minor", "u32"],
    ["max_readahead", "u32"],
    ["flags", "u32"],
    ["flags2", "u32"],
    ...unused(11, "unused"),
  ] as const,
);
/** `struct fuse_init_out` (64). */
export const INIT_OUT = struct(
  "fuse_init_out",
  [
    ["major", "u32"],
    ["minor", "u32"],
    ["max_readahead", "u32"],
    ["flags", "u32"],
    ["max_background", "u16"],
    ["congestion_threshold", "u16"],
    ["max_write", "u32"],
    ["time_gran", "u32"],
    ["max_pages", "u16"],
    ["map_alignment", "u16"],
    ["flags2", "u32"],
    ["max_stack_depth", "u32"],
    ...unused(6, "unused"),
  ] as const,
);
/** `struct fuse_backing_map` (16): the argument of FUSE_DEV_IOC_BACKING_OPEN (7.40). */
export const BACKING_MAP = struct(
  "fuse_backing_map",
  [
    ["fd", "i32"],
    ["flags", "u32"],
    ["padding", "u64"],
  ] as const,
);
/** `struct fuse_dirent` head (24); the name follows, the record padded to 8 bytes. */
export const DIRENT = struct(
  "fuse_dirent",
  [
    ["ino", "u64"],
    ["off", "u64"],
    ["namelen", "u32"],
    ["type", "u32"],
  ] as const,
);

// --- opcodes -------------------------------------------------------------------------------

/** What follows the in-header of a request: a fixed struct, then zero, one or two NUL-terminated names. */
export interface OpSpec {
  /** Opcode name as in fuse.h without the `FUSE_` prefix. */
  name: string;
  /** The fixed input struct, if any. */
  input?: Struct<string>;
  /** Number of trailing NUL-terminated names (SYMLINK: name then target; RENAME: old then new). */
  names: 0 | 1 | 2;
  /** False for requests the kernel expects no reply to (FORGET, BATCH_FORGET, INTERRUPT). */
  reply: boolean;
}

/**
 * The one opcode table, by name: number, fixed input struct, trailing names, whether a reply is
 * sent. {@link OP} (numbers by name) and {@link OPCODES} (specs by number) are both derived from it.
 */
const TABLE = {
  LOOKUP: [1, { names: 1, reply: true }],
  FORGET: [2, { input: FORGET_IN, names: 0, reply: false }],
  GETATTR: [3, { input: GETATTR_IN, names: 0, reply: true }],
  SETATTR: [4, { input: SETATTR_IN, names: 0, reply: true }],
  READLINK: [5, { names: 0, reply: true }],
  SYMLINK: [6, { names: 2, reply: true }],
  MKNOD: [8, { input: MKNOD_IN, names: 1, reply: true }],
  MKDIR: [9, { input: MKDIR_IN, names: 1, reply: true }],
  UNLINK: [10, { names: 1, reply: true }],
  RMDIR: [11, { names: 1, reply: true }],
  RENAME: [12, { input: RENAME_IN, names: 2, reply: true }],
  LINK: [13, { input: LINK_IN, names: 1, reply: true }],
  OPEN: [14, { input: OPEN_IN, names: 0, reply: true }],
  READ: [15, { input: READ_IN, names: 0, reply: true }],
  WRITE: [16, { input: WRITE_IN, names: 0, reply: true }],
  STATFS: [17, { names: 0, reply: true }],
  RELEASE: [18, { input: RELEASE_IN, names: 0, reply: true }],
  FSYNC: [20, { input: FSYNC_IN, names: 0, reply: true }],
  SETXATTR: [21, { input: SETXATTR_IN, names: 1, reply: true }],
  GETXATTR: [22, { input: GETXATTR_IN, names: 1, reply: true }],
  LISTXATTR: [23, { input: GETXATTR_IN, names: 0, reply: true }],
  REMOVEXATTR: [24, { names: 1, reply: true }],
  FLUSH: [25, { input: FLUSH_IN, names: 0, reply: true }],
  INIT: [26, { input: INIT_IN, names: 0, reply: true }],
  OPENDIR: [27, { input: OPEN_IN, names: 0, reply: true }],
  READDIR: [28, { input: READ_IN, names: 0, reply: true }],
  RELEASEDIR: [29, { input: RELEASE_IN, names: 0, reply: true }],
  FSYNCDIR: [30, { input: FSYNC_IN, names: 0, reply: true }],
  GETLK: [31, { names: 0, reply: true }],
  SETLK: [32, { names: 0, reply: true }],
  SETLKW: [33, { names: 0, reply: true }],
  ACCESS: [34, { input: ACCESS_IN, names: 0, reply: true }],
  CREATE: [35, { input: CREATE_IN, names: 1, reply: true }],
  INTERRUPT: [36, { input: INTERRUPT_IN, names: 0, reply: false }],
  BMAP: [37, { names: 0, reply: true }],
  DESTROY: [38, { names: 0, reply: true }],
  IOCTL: [39, { names: 0, reply: true }],
  POLL: [40, { names: 0, reply: true }],
  BATCH_FORGET: [42, { input: BATCH_FORGET_IN, names: 0, reply: false }],
  FALLOCATE: [43, { input: FALLOCATE_IN, names: 0, reply: true }],
  READDIRPLUS: [44, { input: READ_IN, names: 0, reply: true }],
  RENAME2: [45, { input: RENAME2_IN, names: 2, reply: true }],
  LSEEK: [46, { input: LSEEK_IN, names: 0, reply: true }],
  COPY_FILE_RANGE: [47, { names: 0, reply: true }],
  SYNCFS: [50, { names: 0, reply: true }],
  TMPFILE: [51, { input: CREATE_IN, names: 1, reply: true }],
  STATX: [52, { names: 0, reply: true }],
} as const satisfies Record<string, readonly [number, Omit<OpSpec, "name">]>;

/** Opcode numbers by name (fuse.h without `FUSE_`). */
export const OP = Object.fromEntries(
  Object.entries(TABLE).map(([name, [n]]) => [name, n]),
) as { readonly [K in keyof typeof TABLE]: (typeof TABLE)[K][0] };

/** An opcode's name in {@link OP}. */
export type OpName = keyof typeof TABLE;

/** The decoded fixed input struct of opcode `N` (no fields when it has none). */
export type ArgOf<N extends OpName> = (typeof TABLE)[N][1] extends { input: Struct<infer T> }
  ? Record<T, number>
  : Record<never, number>;

/** Request specs by opcode number: parsing, trailing names, whether a reply is sent, debug names. */
export const OPCODES: Readonly<Record<number, OpSpec>> = Object.fromEntries(
  Object.entries(TABLE).map(([name, [n, spec]]) => [n, { name, ...spec }]),
);

// --- constants ----------------------------------------------------------------------------

/**
 * Protocol version this server speaks (7.40: the newest whose structs are declared above; 7.39
 * added STATX, answered ENOSYS, and 7.40 passthrough: `max_stack_depth`, `backing_id`,
 * `fuse_backing_map`).
 */
export const KERNEL_VERSION = { major: 7, minor: 40 } as const;
/** Node id of the root directory. */
export const ROOT_ID = 1;

/** `fuse_init_in.flags` / `fuse_init_out.flags` bits used here. */
export const INIT = {
  ASYNC_READ: 1 << 0,
  ATOMIC_O_TRUNC: 1 << 3,
  BIG_WRITES: 1 << 5,
  AUTO_INVAL_DATA: 1 << 12,
  /** READDIRPLUS: listings carry each entry's LOOKUP answer. */
  DO_READDIRPLUS: 1 << 13,
  /** The kernel picks READDIRPLUS or READDIR per directory (plus while entries get looked up). */
  READDIRPLUS_AUTO: 1 << 14,
  PARALLEL_DIROPS: 1 << 18,
  MAX_PAGES: 1 << 22,
  CACHE_SYMLINKS: 1 << 23,
  /**
   * The server clears setuid/setgid (and file capabilities) on write, truncate and chown, as the
   * VFS does: the kernel flags the requests of callers without CAP_FSETID (below) instead of
   * sending the writer's own SETATTR of the mode first, and stops asking for
   * `security.capability` before every write.
   */
  HANDLE_KILLPRIV_V2: 1 << 28,
  /** `flags2` is valid (in and out): the flags above bit 31. */
  INIT_EXT: 1 << 30,
} as const;

/** `fuse_init_in.flags2` / `fuse_init_out.flags2` bits (init flag bit 32 + n is bit n here). */
export const INIT2 = {
  /** FUSE_PASSTHROUGH (bit 37): OPEN/CREATE may hand READ/WRITE/mmap of a file to a backing file. */
  PASSTHROUGH: 1 << 5,
} as const;

/** `fuse_write_in.write_flags`: the writer lacks CAP_FSETID, clear setuid/setgid. */
export const WRITE_KILL_SUIDGID = 1 << 2;
/** `fuse_open_in.open_flags` / `fuse_create_in.open_flags`: O_TRUNC by a caller without CAP_FSETID. */
export const OPEN_KILL_SUIDGID = 1 << 0;

/** `fuse_setattr_in.valid` bits. */
export const FATTR = {
  MODE: 1 << 0,
  UID: 1 << 1,
  GID: 1 << 2,
  SIZE: 1 << 3,
  ATIME: 1 << 4,
  MTIME: 1 << 5,
  FH: 1 << 6,
  ATIME_NOW: 1 << 7,
  MTIME_NOW: 1 << 8,
  LOCKOWNER: 1 << 9,
  CTIME: 1 << 10,
  /** With HANDLE_KILLPRIV_V2: clear setuid/setgid (truncate without CAP_FSETID, chown). */
  KILL_SUIDGID: 1 << 11,
} as const;

/** `fuse_open_out.open_flags` bits. */
export const FOPEN = {
  DIRECT_IO: 1 << 0,
  KEEP_CACHE: 1 << 1,
  NONSEEKABLE: 1 << 2,
  /** close(2) sends no FLUSH (without a writeback cache; 7.36). */
  NOFLUSH: 1 << 5,
  /** Reads, writes and mmap go to the backing file of `backing_id` (7.40). */
  PASSTHROUGH: 1 << 7,
} as const;

/** `fuse_getattr_in.getattr_flags`: `fh` is valid. */
export const GETATTR_FH = 1;

/** RENAME2 flags (renameat2). */
export const RENAME = { NOREPLACE: 1, EXCHANGE: 2, WHITEOUT: 4 } as const;

/** Size of the buffer a read of /dev/fuse needs: max_write plus room for headers. */
export const MAX_WRITE = 1 << 20;
/** Read buffer size: at least max_write + 4 KiB (platform-notes). */
export const READ_BUFFER = MAX_WRITE + 64 * 1024;
