/** Extended attributes: the backing file's `user.*` in home/shared (as the caller); read-only `user.cortexfs.*` facts of every node. */
import { type Attr, encode, GETXATTR_OUT, OP } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import { XATTR_MAX, xattrBuf } from "../sys/dir.ts";
import * as libc from "../sys/libc.ts";
import { outView, S } from "./attr.ts";
import { asCaller } from "./caller.ts";
import type { Kind } from "./classify.ts";
import type { Request } from "./conn.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;
const enc = new TextEncoder();
/** The namespace served; every name in it is listed by LISTXATTR. */
const PREFIX = "user.cortexfs.";
/** The caller's last refused write of a control (src/fuse/why.ts). */
const REFUSED = `${PREFIX}refused`;
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
const USER = enc.encode("user.");
const OURS = enc.encode(PREFIX);
const listBuf = new Uint8Array(XATTR_MAX);

/** Whether `buf[at..]` starts with `prefix`. */
function startsWith(buf: Uint8Array, at: number, prefix: Uint8Array): boolean {
  if (at + prefix.length > buf.length) return false;
  for (let i = 0; i < prefix.length; i++) if (buf[at + i] !== prefix[i]) return false;
  return true;
}

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
      f.kind === "sock" || f.kind === "launcher" ||
      (f.kind === "control" && this.#t.virtualText(f.kind, f.path) !== null); // a model's `limit`
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

  /**
   * The path of node `id` when it is plain storage (home/shared), whose `user.*` attributes are
   * the backing file's; null elsewhere; -ENOENT when the node has no name.
   */
  #plain(id: number): string | null | number {
    const t = this.#t;
    const path = t.path(id);
    if (path === null) return -E.ENOENT;
    return t.kind(path) === "rw" ? path : null;
  }

  /**
   * GETXATTR: in home/shared a `user.*` value of the backing file (as the caller, the name itself
   * never followed); `user.cortexfs.*` everywhere; size 0 asks for its length; ERANGE when it does
   * not fit.
   */
  getxattr(req: Request<"GETXATTR">, out: Uint8Array): number {
    const name = req.names[0];
    // Only the user namespace exists here. ENOTSUP (not ENODATA) for security.*, system.* and
    // trusted.* lets `ls -l` mark the whole mount as having no SELinux labels and no ACLs after
    // one probe, instead of asking twice for every file.
    if (!name.startsWith("user.")) return -E.ENOTSUP;
    const plain = name.startsWith(PREFIX) ? null : this.#plain(req.nodeid);
    if (typeof plain === "number") return plain;
    if (plain !== null) {
      const t = this.#t;
      const at = t.at(plain);
      if (typeof at === "number") return at;
      const size = req.arg.size;
      const cname = libc.cstr(name);
      const n = asCaller(req, () => t.dir.getxattr(at, cname, { probe: size === 0 }));
      if (n < 0) return n;
      if (size === 0) {
        const [v, o] = outView(out);
        return encode(GETXATTR_OUT, v, o, { size: n }) - o;
      }
      if (n > size) return -E.ERANGE;
      out.set(xattrBuf.subarray(0, n));
      return n;
    }
    const f = this.#facts(req.nodeid);
    if (typeof f === "number") return f;
    // Not listed (it has a value only for some callers): why the caller's last write of this
    // control was refused, as `ctx why PATH` prints it.
    const v = name === REFUSED
      ? this.#t.why.of(f.path, req.uid)
      : name.startsWith(PREFIX)
      ? this.#value(f, name.slice(PREFIX.length))
      : null;
    if (v === null) return -E.ENODATA;
    return this.#answer(out, req.arg.size, enc.encode(v));
  }

  /**
   * LISTXATTR: in home/shared the backing file's `user.*` names (as the caller; the projection's
   * names are not listed there, so `cp -a`, `rsync -X` and `getfattr -d` see what a local disk
   * holds); elsewhere every `user.cortexfs.*` name (the same set for every node).
   */
  listxattr(req: Request<"LISTXATTR">, out: Uint8Array): number {
    const plain = this.#plain(req.nodeid);
    if (typeof plain === "number") return plain;
    if (plain !== null) {
      const t = this.#t;
      const at = t.at(plain);
      if (typeof at === "number") return at;
      const n = asCaller(req, () => t.dir.listxattr(at));
      if (n < 0) return n;
      // only what is served: user.* names outside the projection's prefix
      let len = 0;
      for (let i = 0; i < n;) {
        let end = xattrBuf.indexOf(0, i);
        if (end < 0 || end >= n) end = n;
        if (startsWith(xattrBuf, i, USER) && !startsWith(xattrBuf, i, OURS)) {
          listBuf.set(xattrBuf.subarray(i, end + 1), len);
          len += end + 1 - i;
        }
        i = end + 1;
      }
      return this.#answer(out, req.arg.size, listBuf.subarray(0, len));
    }
    const f = this.#facts(req.nodeid);
    if (typeof f === "number") return f;
    // Linux keeps user.* attributes off symlinks (the kernel answers ENODATA without asking):
    // listing names nobody can read would only make `getfattr -d` print errors.
    const none = (f.attr.mode & S.IFMT) === S.IFLNK;
    return this.#answer(out, req.arg.size, none ? NONE : LIST);
  }

  /**
   * SETXATTR / REMOVEXATTR: in home/shared a `user.*` attribute of the backing file, as the caller
   * (the backing kernel checks write access and ownership rules), the name itself never followed;
   * `user.cortexfs.*` is the projection's (EPERM). Elsewhere nothing can be stored.
   */
  write(req: Request<"SETXATTR" | "REMOVEXATTR">): number {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const k = t.kind(path);
    const name = req.names[0];
    if (k === "rw" && name.startsWith("user.")) {
      if (name.startsWith(PREFIX)) return -E.EPERM;
      const at = t.at(path);
      if (typeof at === "number") return at;
      const cname = libc.cstr(name);
      if (req.opcode === OP.REMOVEXATTR) return asCaller(req, () => t.dir.removexattr(at, cname));
      const size = req.arg.size;
      if (req.data.length < size) return -E.EIO;
      const value = req.data.subarray(0, size);
      return asCaller(req, () => t.dir.setxattr(at, cname, value, req.arg.flags));
    }
    // ENOTSUP for other namespaces in home/shared and in controls (`sed -i` and `cp -a` then skip
    // copying ACLs and xattrs instead of failing); the read-only projection answers EROFS.
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
