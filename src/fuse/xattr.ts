/** Read-only `user.cortexfs.*` extended attributes: what a /ctx path is, where it comes from, how big it is. */
import { type Attr, encode, GETXATTR_OUT } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import { outView, S } from "./attr.ts";
import type { Kind } from "./classify.ts";
import type { Request } from "./conn.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;
const enc = new TextEncoder();
/** The namespace served; every name in it is listed by LISTXATTR. */
const PREFIX = "user.cortexfs.";
/** The attribute names, in listing order (spec/fuse.md "Extended attributes"). */
export const XATTR_NAMES = [
  "abi_path",
  "kind",
  "origin",
  "storage",
  "backing_exists",
  "bytes",
] as const;
/** The LISTXATTR answer: every full name, NUL-terminated, built once. */
const LIST = enc.encode(XATTR_NAMES.map((n) => `${PREFIX}${n}\0`).join(""));
const NONE = new Uint8Array(0);

/** The facts of one node the attributes are made of. */
interface Facts {
  path: string;
  kind: Kind;
  /** In-memory temp or a new control not committed yet. */
  memory: boolean;
  attr: Attr;
}

/** What a kind is called in `user.cortexfs.kind`: the classifier's kinds, with plain entries by file type. */
function kindName(f: Facts): string {
  const type = f.attr.mode & S.IFMT;
  switch (f.kind) {
    case "ro":
      return type === S.IFDIR ? "dir" : "object";
    case "rw":
      return type === S.IFDIR ? "dir" : type === S.IFLNK ? "symlink" : "file";
    case "control":
      return f.memory ? "temp" : "control";
    case "none":
      return "none"; // never reached: such paths have no node
    default:
      return f.kind; // root status sock launcher cdir stage
  }
}

/** The xattr operations, over the shared {@link Tree}. */
export class Xattrs {
  #t: Tree;

  constructor(tree: Tree) {
    this.#t = tree;
  }

  #facts(nodeid: number): Facts | number {
    const t = this.#t;
    const path = t.path(nodeid);
    if (path === null) return -E.ENOENT;
    const kind = t.kind(path);
    const a = t.stat(path);
    if (typeof a !== "number") return { path, kind, memory: t.temps.has(path), attr: a };
    // a control an open handle is creating: it exists, in memory, until its first commit
    const w = a === -E.ENOENT && kind === "control" ? t.pending(path) : null;
    return w ? { path, kind, memory: true, attr: t.pendingAttr(path, w) } : a;
  }

  /** The value of attribute `name` (without the prefix) of `f`, or null when there is none. */
  #value(f: Facts, name: string): string | null {
    const virtual = f.memory || f.kind === "root" || f.kind === "status" ||
      f.kind === "sock" || f.kind === "launcher";
    switch (name) {
      case "abi_path":
        return `/${f.path}`;
      case "kind":
        return kindName(f);
      case "origin":
        return virtual ? "virtual" : "disk";
      case "storage":
        // where the bytes served live: made by the daemon (status text, launcher scripts, socket
        // alias targets, temps) or read from the backing tree
        return virtual ? "memory" : "disk";
      case "backing_exists": {
        const t = this.#t;
        if (f.memory) return "0";
        return typeof t.lstat(f.path) === "number" ? "0" : "1";
      }
      case "bytes":
        return String(f.attr.size);
    }
    return null;
  }

  /** GETXATTR: a `user.cortexfs.*` value; size 0 asks for its length; ERANGE when it does not fit. */
  getxattr(req: Request, out: Uint8Array): number {
    const name = req.names[0];
    // Only the user namespace exists here. ENOTSUP (not ENODATA) for security.*, system.* and
    // trusted.* lets `ls -l` mark the whole mount as having no SELinux labels and no ACLs after
    // one probe, instead of asking twice for every file.
    if (!name.startsWith("user.")) return -E.ENOTSUP;
    const f = this.#facts(req.nodeid);
    if (typeof f === "number") return f;
    const v = name.startsWith(PREFIX) ? this.#value(f, name.slice(PREFIX.length)) : null;
    if (v === null) return -E.ENODATA;
    return this.#answer(out, req.arg.size, enc.encode(v));
  }

  /** LISTXATTR: every `user.cortexfs.*` name (the same set for every node). */
  listxattr(req: Request, out: Uint8Array): number {
    const f = this.#facts(req.nodeid);
    if (typeof f === "number") return f;
    // Linux keeps user.* attributes off symlinks (the kernel answers ENODATA without asking):
    // listing names nobody can read would only make `getfattr -d` print errors.
    const none = (f.attr.mode & S.IFMT) === S.IFLNK;
    return this.#answer(out, req.arg.size, none ? NONE : LIST);
  }

  /** SETXATTR / REMOVEXATTR: the attributes are read-only, and nothing else can be stored. */
  write(req: Request): number {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    // ENOTSUP where files are writable (home/shared, controls: `sed -i` and `cp -a` then skip
    // copying ACLs and xattrs instead of failing); the read-only projection answers EROFS.
    const k = t.kind(path);
    return k === "rw" || k === "control" ? -E.ENOTSUP : -E.EROFS;
  }

  /** The reply to a size probe (size 0: `fuse_getxattr_out`), the bytes, or ERANGE. */
  #answer(out: Uint8Array, size: number, bytes: Uint8Array): number {
    if (size === 0) {
      const [v, o] = outView(out);
      return encode(GETXATTR_OUT, v, o, { size: bytes.length }) - o;
    }
    if (bytes.length > size) return -E.ERANGE;
    out.set(bytes);
    return bytes.length;
  }
}
