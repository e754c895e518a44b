/** The /ctx file system: the opcode → operation table over one storage generation, plus LOOKUP, GETATTR, ACCESS and STATFS. */
import { encode, GETATTR_FH, OP, STATFS_OUT } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { fromStat, outView, putAttr, putRawAttr, rawStat } from "./attr.ts";
import { Agents } from "./agents.ts";
import type { Backing } from "./backing.ts";
import { ROOT_NAMES } from "./classify.ts";
import type { FileSystem, Handlers, Request } from "./conn.ts";
import { Dirs } from "./dirs.ts";
import { Files } from "./files.ts";
import { Namespace } from "./namespace.ts";
import { join, type Node, type Nodes } from "./nodes.ts";
import { type CtxFsOptions, Tree } from "./tree.ts";
import { Xattrs } from "./xattr.ts";

export type { CtxFsOptions } from "./tree.ts";

const E = ERRNO;
const ROOT = new Set<string>(ROOT_NAMES);

/** The /ctx file system; `handlers` and `forget` plug into a {@link Conn}. */
export class CtxFs implements FileSystem {
  readonly handlers: Handlers;
  #t: Tree;
  #back: Backing;

  constructor(options: CtxFsOptions) {
    const t = this.#t = new Tree(options);
    const agents = new Agents(t);
    const files = new Files(t, agents);
    const names = new Namespace(t, agents);
    const dirs = new Dirs(t);
    const xattrs = new Xattrs(t);
    this.handlers = {
      [OP.LOOKUP]: (r, out) => this.lookup(r, out),
      [OP.GETATTR]: (r, out) => this.getattr(r, out),
      [OP.SETATTR]: (r, out) => files.setattr(r, out),
      [OP.READLINK]: (r) => names.readlink(r),
      [OP.SYMLINK]: (r, out) => names.symlink(r, out),
      [OP.MKNOD]: (r, out) => names.mknod(r, out),
      [OP.MKDIR]: (r, out) => names.mkdir(r, out),
      [OP.UNLINK]: (r) => names.unlink(r),
      [OP.RMDIR]: (r) => names.rmdir(r),
      [OP.RENAME]: (r) => names.rename(r, 0),
      [OP.RENAME2]: (r) => names.rename(r, r.arg.flags),
      [OP.LINK]: (r, out) => names.link(r, out),
      [OP.OPEN]: (r, out) => files.open(r, out),
      [OP.READ]: (r, out) => files.read(r, out),
      [OP.WRITE]: (r, out) => files.write(r, out),
      [OP.STATFS]: (_r, out) => this.statfs(out),
      [OP.RELEASE]: (r) => files.release(r),
      [OP.FSYNC]: (r) => files.fsync(r),
      [OP.FLUSH]: (r) => files.flush(r),
      [OP.OPENDIR]: (r, out) => dirs.opendir(r, out),
      [OP.READDIR]: (r, out) => dirs.readdir(r, out),
      [OP.READDIRPLUS]: (r, out) => dirs.readdirplus(r, out),
      [OP.RELEASEDIR]: (r) => dirs.releasedir(r),
      [OP.FSYNCDIR]: (r) => dirs.fsyncdir(r),
      [OP.ACCESS]: (r) => (t.path(r.nodeid) === null ? -E.ENOENT : 0),
      [OP.CREATE]: (r, out) => files.create(r, out),
      [OP.TMPFILE]: (r, out) => files.tmpfile(r, out),
      [OP.FALLOCATE]: (r) => files.fallocate(r),
      [OP.LSEEK]: (r, out) => files.lseek(r, out),
      [OP.GETXATTR]: (r, out) => xattrs.getxattr(r, out),
      [OP.LISTXATTR]: (r, out) => xattrs.listxattr(r, out),
      [OP.SETXATTR]: (r) => xattrs.write(r),
      [OP.REMOVEXATTR]: (r) => xattrs.write(r),
    };
    this.#back = t.back;
  }

  /**
   * Before every request no backing directory fd is in use: close the ones retired by the last
   * request (backing.ts never closes an fd under a call still holding it).
   */
  before(): void {
    this.#back.settle();
  }

  /** The node table (diagnostics and tests). */
  get nodes(): Nodes {
    return this.#t.nodes;
  }

  /** INIT answered: with passthrough, OPEN/CREATE of plain home/shared files register backing files on `fd`. */
  init(_flags: number, options: { passthrough: boolean; fd: number }): void {
    this.#t.passthroughFd = options.passthrough ? options.fd : -1;
  }

  /** FORGET. */
  forget(nodeid: number, nlookup: number): void {
    this.#t.nodes.forget(nodeid, nlookup);
  }

  /** LOOKUP. */
  lookup(req: Request, out: Uint8Array): number {
    const t = this.#t;
    const dir = t.nodes.get(req.nodeid);
    const parent = dir?.path ?? null;
    if (parent === null) return -E.ENOENT;
    const name = req.names[0];
    const known = t.nodes.child(dir as Node, name); // dir is defined: parent !== null
    if (known !== undefined) return t.entry(out, known.path as string, known);
    if (parent === "" && !ROOT.has(name)) return -E.ENOENT;
    const path = join(parent, name);
    const r = t.entry(out, path);
    if (r >= 0) t.nodes.adopt(dir as Node, name, path);
    return r;
  }

  /** GETATTR (with a file handle when the kernel has one: unlinked open files still answer). */
  getattr(req: Request<"GETATTR">, out: Uint8Array): number {
    const t = this.#t;
    const h = req.arg.getattr_flags & GETATTR_FH ? t.handles.get(req.arg.fh) : undefined;
    const node = t.nodes.get(req.nodeid);
    const path = node?.path ?? null;
    if (h?.t === "fd" && path !== null && (t.kind(path) === "rw" || t.kind(path) === "stage")) {
      const st = libc.fstat(h.fd);
      if (typeof st === "number") return st;
      (node as Node).ino = st.ino;
      return putAttr(out, { attr: fromStat(st), ttl: t.ttl("rw", path) });
    }
    if (path === null) {
      // Every name is gone (unlinked, replaced by a rename) but the file is open: its attributes
      // are the open file's (nlink 0). fstat(2) comes without an fh: any handle on the node.
      const fd = t.openFd(req.nodeid, { fh: h?.t === "fd" ? req.arg.fh : undefined });
      if (fd === null) return -E.ENOENT;
      const st = libc.fstat(fd);
      return typeof st === "number" ? st : putAttr(out, { attr: fromStat(st), ttl: 0 });
    }
    const info = t.nodeInfo(node as Node & { path: string }); // path !== null above
    if (t.plain(info)) {
      const r = t.lstatRaw(path, info);
      if (r < 0) return r;
      (node as Node).ino = rawStat.ino();
      return putRawAttr(out, info.ttl);
    }
    const a = t.stat(path, info, true);
    if (typeof a === "number") {
      const w = a === -E.ENOENT && info.kind === "control" ? t.pending(path, h) : null;
      return w ? putAttr(out, { attr: t.pendingAttr(path, w), ttl: 0 }) : a;
    }
    (node as Node).ino = a.ino;
    return putAttr(out, { attr: a, ttl: info.ttl });
  }

  /** STATFS: the backing file system's counters. */
  statfs(out: Uint8Array): number {
    const s = this.#t.dir.statvfs();
    if (typeof s === "number") return s;
    const [v, o] = outView(out);
    return encode(STATFS_OUT, v, o, {
      blocks: s.blocks,
      bfree: s.bfree,
      bavail: s.bavail,
      files: s.files,
      ffree: s.ffree,
      bsize: s.bsize,
      namelen: s.namemax,
      frsize: s.frsize,
    }) - o;
  }

  /** Live file handles (status, tests). */
  get handleCount(): number {
    return this.#t.handles.size;
  }
}
