/** The /ctx projection: FUSE operations over one storage generation, by path kind (see classify.ts). */
import {
  type Attr,
  encode,
  FATTR,
  GETATTR_FH,
  OP,
  RENAME,
  STATFS_OUT,
  WRITE_OUT,
} from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { Dir, UTIME } from "../sys/dir.ts";
import { fromStat, outView, putAttr, putEntry, S, virtualAttr, virtualIno } from "./attr.ts";
import { isName } from "../abi/names.ts";
import {
  baseOf,
  classify,
  isTempName,
  type Kind,
  parentOf,
  ROOT_NAMES,
  stagedName,
} from "./classify.ts";
import { type Commit, ControlWriter, newTemp, put, resize, type Temp } from "./control.ts";
import type { FileSystem, Handler, Request } from "./conn.ts";
import { Listing } from "./listing.ts";
import { join, type Node, Nodes } from "./nodes.ts";

/** Options of the projection. */
export interface CtxFsOptions {
  /** Absolute path of the concrete generation directory (resolved once at startup). */
  root: string;
  /** Run directory: `agent/<n>.sock` points at `<run>/agent/<n>.sock`. */
  run: string;
  /** `bin/<name>` launcher scripts by name. */
  bins: Record<string, string>;
  /** Entry/attribute timeout in seconds for `home/` and `shared/` (everything else uses 0). */
  ttl: number;
  /** The dynamic text of `/ctx/status`. */
  status: () => string;
  /** Validates and atomically replaces a control (the store bridge). */
  commit: Commit;
  /** Whether a control name may be written: "control", "readonly" (EROFS) or "unknown" (EINVAL). */
  controlKind: (abiPath: string) => "control" | "readonly" | "unknown";
  /** Owner uid of the object a control directory belongs to. */
  owner: (abiPath: string) => number;
  /** Whether `agent/<name>` is still being created (its entry is absent). */
  creating: (name: string) => boolean;
  /** `agent/<name>` was renamed into place through the mount: serve it (the reply waits for this). */
  onAgent?: (name: string) => void | Promise<unknown>;
  /** `agent/<name>` was removed through the mount: stop serving it. */
  onAgentGone?: (name: string) => void | Promise<unknown>;
}

type Handle =
  | { t: "fd"; fd: number }
  | { t: "bytes"; data: Uint8Array }
  | { t: "control"; fd: number; writer: ControlWriter | null }
  | { t: "temp"; temp: Temp }
  | { t: "dir"; list: Listing };

/** True for `home/<uid>/agent/...` and `shared/<space>/agent/...`: written behind the mount's back. */
function daemonWritten(path: string): boolean {
  const top = path.startsWith("home/") ? 5 : path.startsWith("shared/") ? 7 : -1;
  if (top < 0) return false;
  const slash = path.indexOf("/", top);
  return slash > 0 && path.startsWith("agent", slash + 1) &&
    (path.length === slash + 6 || path[slash + 6] === "/");
}

/** What a path is, cached: its kind, backing C path (relative to the generation) and timeout. */
interface PathInfo {
  path: string;
  kind: Kind;
  c: Uint8Array;
  ttl: number;
}

const E = ERRNO;
const enc = new TextEncoder();
const dec = new TextDecoder();
const MAX_TEMPS = 64;
const DT = { DIR: 4, REG: 8, LNK: 10 } as const;
const DOT = enc.encode(".");
/**
 * `agent/` and `home/` are shown sticky and world-writable, so that under default_permissions
 * the kernel lets an unprivileged user ask for a creation there at all; the rules below decide
 * what may be created (and the sticky bit keeps others' entries from being removed or renamed).
 */
const SHARED_DIR = 0o1777;
const DOTDOT = enc.encode("..");

/** The /ctx file system; `handlers` and `forget` plug into a {@link Conn}. */
export class CtxFs implements FileSystem {
  readonly nodes = new Nodes();
  readonly handlers: Partial<Record<number, Handler>>;
  #o: CtxFsOptions;
  #bins: Set<string>;
  #handles = new Map<number, Handle>();
  #nextFh = 1;
  #temps = new Map<string, Temp>();
  #start = Date.now() / 1000;
  /** The generation directory: every backing call walks from here (see src/sys/dir.ts). */
  #dir: Dir;

  constructor(options: CtxFsOptions) {
    this.#o = options;
    this.#dir = new Dir(options.root);
    this.#bins = new Set(Object.keys(options.bins));
    const h: Partial<Record<number, Handler>> = {
      [OP.LOOKUP]: (r, out) => this.lookup(r, out),
      [OP.GETATTR]: (r, out) => this.getattr(r, out),
      [OP.SETATTR]: (r, out) => this.setattr(r, out),
      [OP.READLINK]: (r) => this.readlink(r),
      [OP.SYMLINK]: (r, out) => this.symlink(r, out),
      [OP.MKNOD]: (r, out) => this.mknod(r, out),
      [OP.MKDIR]: (r, out) => this.mkdir(r, out),
      [OP.UNLINK]: (r) => this.unlink(r),
      [OP.RMDIR]: (r) => this.rmdir(r),
      [OP.RENAME]: (r) => this.rename(r, 0),
      [OP.RENAME2]: (r) => this.rename(r, r.arg.flags),
      [OP.LINK]: (r, out) => this.link(r, out),
      [OP.OPEN]: (r, out) => this.open(r, out),
      [OP.READ]: (r, out) => this.read(r, out),
      [OP.WRITE]: (r, out) => this.write(r, out),
      [OP.STATFS]: (_r, out) => this.statfs(out),
      [OP.RELEASE]: (r) => this.release(r),
      [OP.FSYNC]: (r) => this.fsync(r),
      [OP.FLUSH]: (r) => this.flush(r),
      [OP.OPENDIR]: (r, out) => this.opendir(r, out),
      [OP.READDIR]: (r, out) => this.readdir(r, out),
      [OP.RELEASEDIR]: (r) => this.releasedir(r),
      [OP.FSYNCDIR]: () => 0,
      [OP.ACCESS]: (r) => (this.#path(r.nodeid) === null ? -E.ENOENT : 0),
      [OP.CREATE]: (r, out) => this.create(r, out),
      // GETXATTR/LISTXATTR have no handler: ENOSYS makes the kernel answer "not supported" itself
      // from then on, instead of one round trip per `ls -l` entry for ACL and SELinux probes.
      [OP.SETXATTR]: (r) => this.#xattrWrite(r),
      [OP.REMOVEXATTR]: (r) => this.#xattrWrite(r),
    };
    this.handlers = h;
  }

  /** FORGET. */
  forget(nodeid: number, nlookup: number): void {
    this.nodes.forget(nodeid, nlookup);
  }

  // --- helpers ---------------------------------------------------------------------------

  #path(id: number): string | null {
    return this.nodes.get(id)?.path ?? null;
  }
  // Kind, backing C path and timeout depend only on the path string: one cached record per path
  // (bounded), because every request needs them and building them costs more than the lstat.
  #infos = new Map<string, PathInfo>();
  #info(path: string): PathInfo {
    let i = this.#infos.get(path);
    if (i === undefined) {
      if (this.#infos.size > 100_000) this.#infos.clear();
      const kind = classify(path, this.#bins);
      i = { path, kind, c: libc.cstr(path === "" ? "." : path), ttl: this.#ttlOf(kind, path) };
      this.#infos.set(path, i);
    }
    return i;
  }
  /** The record of a node's current path, memoized on the node (a rename gives it a new path). */
  #nodeInfo(n: Node & { path: string }): PathInfo {
    const m = n.memo as PathInfo | undefined;
    if (m !== undefined && m.path === n.path) return m;
    return (n.memo = this.#info(n.path));
  }
  #kind(path: string): Kind {
    return this.#info(path).kind;
  }
  #backing(path: string): Uint8Array {
    return this.#info(path).c;
  }
  #ttl(kind: Kind, path: string): number {
    return kind === this.#info(path).kind ? this.#info(path).ttl : this.#ttlOf(kind, path);
  }
  #ttlOf(kind: Kind, path: string): number {
    // The root never changes; plain home/shared files change only through this mount. Agent
    // homes and sessions are written straight into the backing tree by the runtime and by
    // sandboxed tools, so their attributes are never cached (a reader sees a run at once).
    if (kind === "root") return this.#o.ttl;
    return kind === "rw" && !daemonWritten(path) ? this.#o.ttl : 0;
  }

  /** The attributes of `path`, or -errno. */
  #stat(path: string, info: PathInfo = this.#info(path)): Attr | number {
    const kind = info.kind;
    const now = this.#start;
    switch (kind) {
      case "none":
        return -E.ENOENT;
      case "root":
        return virtualAttr("", {
          mode: S.IFDIR | 0o755,
          size: 4096,
          time: now,
          nlink: 2 + 5,
        });
      case "status":
        return virtualAttr(path, {
          mode: S.IFREG | 0o444,
          size: enc.encode(this.#o.status()).length,
          time: Date.now() / 1000,
        });
      case "launcher":
        return virtualAttr(path, {
          mode: S.IFREG | 0o555,
          size: enc.encode(this.#o.bins[baseOf(path)]).length,
          time: now,
        });
      case "sock": {
        const def = this.#dir.lstat(this.#backing(path.slice(0, -5)));
        if (typeof def === "number") return def;
        return virtualAttr(path, {
          mode: S.IFLNK | 0o777,
          size: enc.encode(this.#sockTarget(path)).length,
          time: now,
        });
      }
      case "control": {
        const temp = this.#temps.get(path);
        if (temp) {
          return {
            ...virtualAttr(path, { mode: S.IFREG | temp.mode, size: temp.len, time: temp.mtime }),
            ino: temp.ino,
            uid: temp.uid,
            gid: temp.gid,
          };
        }
        const st = this.#dir.lstat(info.c);
        if (typeof st === "number") return st;
        const a = fromStat(st);
        if ((a.mode & S.IFMT) === S.IFREG) {
          a.uid = this.#o.owner(path);
          a.blksize = 65536; // stdio then writes a whole control in one write(2)
          if (this.#o.controlKind(path) !== "control") a.mode &= ~0o222;
        } else if ((a.mode & S.IFMT) !== S.IFLNK) a.mode &= ~0o222;
        return a;
      }
      case "cdir": {
        const st = this.#dir.lstat(info.c);
        if (typeof st === "number") return st;
        const a = fromStat(st);
        a.uid = this.#o.owner(path + "/x");
        return a;
      }
      case "ro": {
        const st = this.#dir.lstat(info.c);
        if (typeof st === "number") return st;
        const a = fromStat(st);
        if (path === "agent") a.mode = S.IFDIR | SHARED_DIR; // anyone may start an agent
        else if ((a.mode & S.IFMT) !== S.IFLNK) a.mode &= ~0o222;
        return a;
      }
      case "rw":
      case "stage": {
        const st = this.#dir.lstat(info.c);
        if (typeof st === "number") return st;
        const a = fromStat(st);
        if (path === "home") a.mode = S.IFDIR | SHARED_DIR; // anyone may make home/<own uid>
        return a;
      }
    }
  }

  #sockTarget(path: string): string {
    return `${this.#o.run}/${path}`;
  }

  #fh(h: Handle): number {
    const fh = this.#nextFh++;
    this.#handles.set(fh, h);
    return fh;
  }

  #openOut(out: Uint8Array, at: number, fh: number, flags: number): number {
    const [v, o] = outView(out);
    v.setUint32(o + at, fh % 0x1_0000_0000, true);
    v.setUint32(o + at + 4, Math.floor(fh / 0x1_0000_0000), true);
    v.setUint32(o + at + 8, flags, true);
    v.setUint32(o + at + 12, 0, true);
    return at + 16;
  }

  /** Who may change the structure under `parent`: 0 when allowed, else -errno by area. */
  #structural(
    parent: string,
    name: string,
    who?: { uid: number; dir?: boolean },
  ): { kind: Kind; path: string } | number {
    const path = join(parent, name);
    if (parent === "") return -E.EACCES; // the frozen root
    // home/ holds one directory per uid: a user may make (or remove) only its own.
    if (parent === "home" && who && who.uid !== 0 && !(who.dir && name === String(who.uid))) {
      return -E.EACCES;
    }
    const kind = this.#kind(path);
    // A user makes the control dirs of their own tools and models (home/<uid>/{tool,model}/<n>.d).
    if (kind === "rw" || (kind === "cdir" && path.startsWith("home/"))) return { kind, path };
    return -E.EROFS;
  }

  /** Gives a created file to the caller (the daemon runs as root); setgid dirs pass their group. */
  #ownerOf(req: Request, parent: string): [number, number] {
    const st = this.#dir.lstat(this.#backing(parent));
    const gid = typeof st !== "number" && st.mode & S.ISGID ? st.gid : req.gid;
    return [req.uid, gid];
  }

  #entry(out: Uint8Array, path: string): number {
    const known = this.nodes.at(path);
    const info = known?.path === path
      ? this.#nodeInfo(known as Node & { path: string })
      : this.#info(path);
    const a = this.#stat(path, info);
    if (typeof a === "number") return a;
    const kind = info.kind;
    // A file with several names (hard links) is one kernel inode: same node for every name.
    const key = kind === "rw" && a.nlink > 1 && (a.mode & S.IFMT) !== S.IFDIR
      ? String(a.ino)
      : undefined;
    const node = known !== undefined && key === undefined
      ? this.nodes.reref(known)
      : this.nodes.ref(path, key);
    return putEntry(out, { nodeid: node.id, attr: a, ttl: info.ttl });
  }

  // --- agent creation through the mount (spec/fuse.md "Creating agents") ------------------

  /** The agent `agent/<x>` or `agent/<x>.d` names, when `x` is a valid agent name. */
  #agentOf(parent: string, name: string, suffix: "" | ".d"): string | null {
    if (parent !== "agent" || (suffix && !name.endsWith(suffix))) return null;
    const n = suffix ? name.slice(0, -suffix.length) : name;
    return isName(n) ? n : null;
  }

  /** Root, or the uid that owns agent `n` (its `owner`, or its `.d/` before `owner` exists). */
  #mayChange(uid: number, n: string): boolean {
    return uid === 0 || uid === this.#o.owner(`agent/${n}.d/owner`);
  }

  /** MKDIR `agent/<n>.d`: anyone starts an agent of their own under a free name. */
  #mkAgentDir(req: Request, out: Uint8Array, n: string): number {
    const path = `agent/${n}.d`;
    if (typeof this.#dir.lstat(this.#backing(`agent/${n}`)) !== "number") return -E.EEXIST;
    const p = this.#backing(path);
    const r = this.#dir.mkdir(p, req.arg.mode & 0o7777);
    if (r < 0) return r;
    this.#dir.lchown(p, req.uid, req.gid);
    return this.#entry(out, path);
  }

  /** The reply to a request that changed which agents exist: after the hook (a socket) is done. */
  #after(
    hook: ((n: string) => void | Promise<unknown>) | undefined,
    n: string,
  ): number | Promise<number> {
    if (!hook) return 0;
    try {
      const p = hook(n);
      if (!(p instanceof Promise)) return 0;
      return p.then(() => 0, (e) => {
        console.error(`cortexfsd: agent hook for "${n}" failed: ${e}`);
        return 0; // the agent exists either way; the log says why it has no socket
      });
    } catch (e) {
      console.error(`cortexfsd: agent hook for "${n}" failed: ${e}`);
      return 0;
    }
  }

  // --- operations ------------------------------------------------------------------------

  /** LOOKUP. */
  lookup(req: Request, out: Uint8Array): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const name = req.names[0];
    if (parent === "" && !(ROOT_NAMES as readonly string[]).includes(name)) return -E.ENOENT;
    return this.#entry(out, join(parent, name));
  }

  /** GETATTR (with a file handle when the kernel has one: unlinked open files still answer). */
  getattr(req: Request, out: Uint8Array): number {
    const h = req.arg.getattr_flags & GETATTR_FH ? this.#handles.get(req.arg.fh) : undefined;
    const path = this.#path(req.nodeid);
    if (
      h?.t === "fd" && (path === null || this.#kind(path) === "rw" || this.#kind(path) === "stage")
    ) {
      const st = libc.fstat(h.fd);
      if (typeof st === "number") return st;
      return putAttr(out, { attr: fromStat(st), ttl: path === null ? 0 : this.#ttl("rw", path) });
    }
    if (path === null) return -E.ENOENT;
    // nodes.get() found it with a path (#path above)
    const info = this.#nodeInfo(this.nodes.get(req.nodeid) as Node & { path: string });
    const a = this.#stat(path, info);
    if (typeof a === "number") {
      const w = a === -E.ENOENT && info.kind === "control" ? this.#pending(path, h) : null;
      return w ? putAttr(out, { attr: this.#pendingAttr(path, w), ttl: 0 }) : a;
    }
    return putAttr(out, { attr: a, ttl: info.ttl });
  }

  /** SETATTR: chmod, chown, truncate, utimens. */
  setattr(req: Request, out: Uint8Array): number {
    const a = req.arg;
    const v = a.valid;
    const path = this.#path(req.nodeid);
    const h = v & FATTR.FH ? this.#handles.get(a.fh) : undefined;
    if (path === null) {
      if (h?.t !== "fd") return -E.ENOENT;
      if (v & FATTR.SIZE) {
        const r = libc.ftruncate(h.fd, a.size);
        if (r < 0) return r;
      }
      const st = libc.fstat(h.fd);
      return typeof st === "number" ? st : putAttr(out, { attr: fromStat(st), ttl: 0 });
    }
    const kind = this.#kind(path);
    const temp = this.#temps.get(path);
    if (temp) {
      if (v & FATTR.MODE) temp.mode = a.mode & 0o7777;
      if (v & FATTR.UID) temp.uid = a.uid;
      if (v & FATTR.GID) temp.gid = a.gid;
      if (v & FATTR.SIZE) {
        const r = resize(temp, a.size);
        if (r < 0) return r;
      }
      temp.ctime = Date.now() / 1000;
      if (v & (FATTR.SIZE | FATTR.MTIME | FATTR.MTIME_NOW)) temp.mtime = temp.ctime;
      return this.#attrReply(out, path);
    }
    if (kind === "control") {
      if (v & (FATTR.MODE | FATTR.UID | FATTR.GID)) return -E.EROFS;
      if (v & FATTR.SIZE) {
        if (h?.t === "control" && h.writer) {
          const r = h.writer.truncate(a.size);
          if (r < 0) return r;
        } else {
          const w = this.#writer(path, req, { truncate: false });
          if (typeof w === "number") return w;
          const r = w.truncate(a.size);
          if (r < 0) return r;
          const f = w.flush();
          if (f < 0) return f;
        }
      }
      return this.#attrReply(out, path, h);
    }
    // A creator sets the mode and owner of its new control directory (makeDir in createAgent).
    const making = kind === "cdir" && parentOf(path) === "agent" &&
      this.#agentOf("agent", baseOf(path), ".d") !== null;
    if (making) {
      const n = baseOf(path).slice(0, -2);
      if (!this.#mayChange(req.uid, n)) return -E.EACCES;
      if (!this.#o.creating(n)) return -E.EROFS;
      if (v & FATTR.SIZE) return -E.EISDIR;
    } else if (kind !== "rw" && kind !== "stage") return -E.EROFS;
    const p = this.#backing(path);
    if (v & FATTR.MODE) {
      const r = this.#dir.chmod(p, a.mode & 0o7777);
      if (r < 0) return r;
    }
    if (v & (FATTR.UID | FATTR.GID)) {
      const r = this.#dir.lchown(p, v & FATTR.UID ? a.uid : -1, v & FATTR.GID ? a.gid : -1);
      if (r < 0) return r;
    }
    if (v & FATTR.SIZE) {
      const r = h?.t === "fd" ? libc.ftruncate(h.fd, a.size) : this.#dir.truncate(p, a.size);
      if (r < 0) return r;
    }
    if (v & (FATTR.ATIME | FATTR.MTIME | FATTR.ATIME_NOW | FATTR.MTIME_NOW)) {
      const t = (set: number, now: number, s: number, ns: number): [number, number] =>
        v & now ? [0, UTIME.NOW] : v & set ? [s, ns] : [0, UTIME.OMIT];
      const r = this.#dir.utimens(
        p,
        t(FATTR.ATIME, FATTR.ATIME_NOW, a.atime, a.atimensec),
        t(FATTR.MTIME, FATTR.MTIME_NOW, a.mtime, a.mtimensec),
      );
      if (r < 0) return r;
    }
    return this.#attrReply(out, path);
  }

  /**
   * The writer of a new control that an open handle created and has not committed yet (the
   * kernel asks for its attributes, with or without the handle, before the first write).
   */
  #pending(path: string, h?: Handle): ControlWriter | null {
    if (h?.t === "control" && h.writer) return h.writer;
    for (const x of this.#handles.values()) {
      if (x.t === "control" && x.writer?.path === path) return x.writer;
    }
    return null;
  }
  #pendingAttr(path: string, w: ControlWriter): Attr {
    const mode = S.IFREG | 0o644;
    return virtualAttr(path, { mode, size: w.len, uid: w.uid, gid: w.gid, time: this.#start });
  }

  #attrReply(out: Uint8Array, path: string, h?: Handle): number {
    const a = this.#stat(path);
    if (typeof a === "number") {
      const w = a === -E.ENOENT ? this.#pending(path, h) : null;
      return w ? putAttr(out, { attr: this.#pendingAttr(path, w), ttl: 0 }) : a;
    }
    return putAttr(out, { attr: a, ttl: this.#ttl(this.#kind(path), path) });
  }

  /** READLINK. */
  readlink(req: Request): number | Uint8Array {
    const path = this.#path(req.nodeid);
    if (path === null) return -E.ENOENT;
    if (this.#kind(path) === "sock") return enc.encode(this.#sockTarget(path));
    return this.#dir.readlink(this.#backing(path));
  }

  /** SYMLINK (names: link name, target). */
  symlink(req: Request, out: Uint8Array): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const s = this.#structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const p = this.#backing(s.path);
    const r = this.#dir.symlink(libc.cstr(req.names[1]), p);
    if (r < 0) return r;
    const [uid, gid] = this.#ownerOf(req, parent);
    this.#dir.lchown(p, uid, gid);
    return this.#entry(out, s.path);
  }

  /** MKNOD (regular files and FIFOs; devices need CAP_MKNOD in the backing tree anyway). */
  mknod(req: Request, out: Uint8Array): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const s = this.#structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const type = req.arg.mode & S.IFMT;
    if (type !== S.IFREG && type !== 0o010000) return -E.EPERM;
    const p = this.#backing(s.path);
    const r = this.#dir.mknod(p, req.arg.mode, req.arg.rdev);
    if (r < 0) return r;
    const [uid, gid] = this.#ownerOf(req, parent);
    this.#dir.lchown(p, uid, gid);
    return this.#entry(out, s.path);
  }

  /** MKDIR. */
  mkdir(req: Request, out: Uint8Array): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const agent = this.#agentOf(parent, req.names[0], ".d");
    if (agent !== null) return this.#mkAgentDir(req, out, agent);
    const s = this.#structural(parent, req.names[0], { uid: req.uid, dir: true });
    if (typeof s === "number") return s;
    const p = this.#backing(s.path);
    const r = this.#dir.mkdir(p, req.arg.mode & 0o7777);
    if (r < 0) return r;
    const [uid, gid] = this.#ownerOf(req, parent);
    this.#dir.lchown(p, uid, gid);
    return this.#entry(out, s.path);
  }

  /** UNLINK: plain files in home/shared, in-memory temps in control dirs, agents by their owner; the rest is EROFS. */
  unlink(req: Request): number | Promise<number> {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const path = join(parent, req.names[0]);
    if (this.#temps.delete(path)) {
      this.nodes.drop(path);
      return 0;
    }
    const kind = this.#kind(path);
    const entry = this.#agentOf(parent, req.names[0], "");
    // An agent is removed entry first (its socket goes), then its control directory; a half-made
    // agent (no entry) can be taken apart by its creator. Sessions under home/ stay.
    const cdir = kind === "control" && parent.startsWith("agent/")
      ? this.#agentOf("agent", baseOf(parent), ".d")
      : null;
    if (kind === "stage" || (kind === "ro" && entry !== null) || cdir !== null) {
      const n = kind === "stage" ? stagedName(req.names[0]) : entry ?? cdir;
      if (n === null || !this.#mayChange(req.uid, n)) return -E.EACCES;
      if (cdir !== null && !this.#o.creating(cdir)) return -E.EROFS;
      const r = this.#dir.unlink(this.#backing(path));
      if (r < 0) return r;
      this.nodes.drop(path);
      return kind === "ro" ? this.#after(this.#o.onAgentGone, n) : 0;
    }
    const s = this.#structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const r = this.#dir.unlink(this.#backing(path));
    if (r === 0) this.nodes.drop(path);
    return r;
  }

  /** RMDIR. */
  rmdir(req: Request): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const agent = this.#agentOf(parent, req.names[0], ".d");
    if (agent !== null) {
      if (!this.#mayChange(req.uid, agent)) return -E.EACCES;
      if (!this.#o.creating(agent)) return -E.EROFS; // remove agent/<n> first
      const path = `agent/${agent}.d`;
      for (const t of this.#temps.keys()) if (parentOf(t) === path) return -E.ENOTEMPTY;
      const r = this.#dir.rmdir(this.#backing(path));
      if (r === 0) this.nodes.drop(path);
      return r;
    }
    const s = this.#structural(parent, req.names[0], { uid: req.uid, dir: true });
    if (typeof s === "number") return s;
    const r = this.#dir.rmdir(this.#backing(s.path));
    if (r === 0) this.nodes.drop(s.path);
    return r;
  }

  /** RENAME / RENAME2: within home/shared; a temp onto a control commits it through validation. */
  rename(req: Request, flags: number): number | Promise<number> {
    const fromDir = this.#path(req.nodeid);
    const toDir = this.#path(req.arg.newdir);
    if (fromDir === null || toDir === null) return -E.ENOENT;
    if (fromDir === "" || toDir === "") return -E.EACCES;
    const from = join(fromDir, req.names[0]);
    const to = join(toDir, req.names[1]);
    const fk = this.#kind(from), tk = this.#kind(to);
    const plain = (k: Kind, p: string) => k === "rw" || (k === "cdir" && p.startsWith("home/"));
    if (plain(fk, from) && plain(tk, to)) {
      if (toDir === "home" && req.uid !== 0) return -E.EACCES; // home/ holds only uid dirs
      const r = this.#dir.rename(this.#backing(from), this.#backing(to), flags);
      if (r < 0) return r;
      if (flags & RENAME.EXCHANGE) this.nodes.exchange(from, to);
      else this.nodes.move(from, to);
      return 0;
    }
    if (fk === "stage" && toDir === "agent" && fromDir === "agent") {
      // the last step of a creation (or a new program for an agent): the staged entry goes into place
      const n = stagedName(req.names[0]);
      if (n === null || n !== req.names[1] || !isName(n)) return -E.EACCES;
      if (flags & RENAME.EXCHANGE) return -E.EINVAL;
      if (!this.#mayChange(req.uid, n)) return -E.EACCES;
      // an entry needs its control directory first
      if (typeof this.#dir.lstat(this.#backing(`agent/${n}.d`)) === "number") return -E.ENOENT;
      const r = this.#dir.rename(this.#backing(from), this.#backing(to), flags);
      if (r < 0) return r;
      this.nodes.move(from, to);
      return this.#after(this.#o.onAgent, n);
    }
    const temp = this.#temps.get(from);
    if (temp && tk === "control") {
      if (fromDir !== toDir) return -E.EXDEV;
      if (flags & RENAME.EXCHANGE) return -E.EINVAL;
      const exists = this.#temps.has(to) || typeof this.#dir.lstat(this.#backing(to)) !== "number";
      if (flags & RENAME.NOREPLACE && exists) return -E.EEXIST;
      if (this.#temps.has(to) || isTempName(baseOf(to))) {
        this.#temps.delete(to);
        this.#temps.set(to, temp);
      } else {
        try {
          this.#o.commit(to, temp.data.slice(0, temp.len), { uid: req.uid, gid: req.gid });
        } catch (e) {
          return -(E[(e as { errno?: keyof typeof E }).errno ?? "EIO"] ?? E.EIO);
        }
      }
      this.#temps.delete(from);
      this.nodes.move(from, to);
      return 0;
    }
    if ((fk === "rw") !== (tk === "rw")) return -E.EXDEV; // mv falls back to copy + unlink
    return -E.EROFS;
  }

  /** LINK (hard links inside home/shared). */
  link(req: Request, out: Uint8Array): number {
    const from = this.#path(req.arg.oldnodeid);
    const parent = this.#path(req.nodeid);
    if (from === null || parent === null) return -E.ENOENT;
    const s = this.#structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    if (this.#kind(from) !== "rw") return -E.EXDEV;
    const r = this.#dir.link(this.#backing(from), this.#backing(s.path));
    if (r < 0) return r;
    const a = this.#stat(s.path);
    if (typeof a === "number") return a;
    // The kernel expects the existing inode back: the new name becomes an alias of that node.
    const old = this.nodes.get(req.arg.oldnodeid)!; // #path() above found it
    const node = this.nodes.alias(old, s.path, String(a.ino));
    return putEntry(out, { nodeid: node.id, attr: a, ttl: this.#ttl("rw", s.path) });
  }

  #writer(
    path: string,
    req: Request,
    options: { truncate: boolean },
  ): ControlWriter | number {
    const uid = req.uid;
    const ck = this.#o.controlKind(path);
    if (ck === "readonly") return -E.EROFS;
    if (ck === "unknown") return -E.EINVAL;
    if (uid !== 0 && uid !== this.#o.owner(path)) return -E.EACCES;
    let initial = new Uint8Array(0);
    if (!options.truncate) {
      try {
        initial = Deno.readFileSync(`${this.#o.root}/${path}`);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) return -E.EIO;
      }
    }
    return new ControlWriter(path, {
      uid,
      gid: req.gid,
      initial,
      truncated: options.truncate,
      commit: this.#o.commit,
    });
  }

  /** OPEN. */
  open(req: Request, out: Uint8Array): number {
    const path = this.#path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const flags = req.arg.flags;
    const writing = (flags & libc.O.ACCMODE) !== libc.O.RDONLY;
    const kind = this.#kind(path);
    switch (kind) {
      case "rw":
      case "stage":
      case "ro": {
        if (kind === "ro" && (writing || flags & libc.O.TRUNC)) return -E.EROFS;
        const keep = libc.O.ACCMODE | libc.O.APPEND | libc.O.TRUNC | 0o4010000; // + O_SYNC
        const fd = this.#dir.open(this.#backing(path), (flags & keep) | libc.O.NOFOLLOW);
        if (fd < 0) return fd;
        return this.#openOut(out, 0, this.#fh({ t: "fd", fd }), 0);
      }
      case "status":
      case "launcher": {
        if (writing || flags & libc.O.TRUNC) return -E.EROFS;
        const text = kind === "status" ? this.#o.status() : this.#o.bins[baseOf(path)];
        return this.#openOut(out, 0, this.#fh({ t: "bytes", data: enc.encode(text) }), 1);
      }
      case "control": {
        const temp = this.#temps.get(path);
        if (temp) {
          if (writing && flags & libc.O.TRUNC) temp.len = 0;
          return this.#openOut(out, 0, this.#fh({ t: "temp", temp }), 1);
        }
        if (!writing && !(flags & libc.O.TRUNC)) {
          const fd = this.#dir.open(this.#backing(path), libc.O.RDONLY | libc.O.NOFOLLOW);
          if (fd < 0) return fd;
          return this.#openOut(out, 0, this.#fh({ t: "control", fd, writer: null }), 1);
        }
        const w = this.#writer(path, req, { truncate: !!(flags & libc.O.TRUNC) });
        if (typeof w === "number") return w;
        return this.#openOut(out, 0, this.#fh({ t: "control", fd: -1, writer: w }), 1);
      }
      default:
        return writing ? -E.EROFS : -E.EISDIR;
    }
  }

  /** CREATE: new files in home/shared; known controls and temps in control dirs. */
  create(req: Request, out: Uint8Array): number {
    const parent = this.#path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const name = req.names[0];
    const path = join(parent, name);
    const kind = this.#kind(path);
    const flags = req.arg.flags;
    if (kind === "control") {
      if (isTempName(name)) {
        if (req.uid !== 0 && req.uid !== this.#o.owner(path)) return -E.EACCES;
        const inDir = [...this.#temps.keys()].filter((p) => parentOf(p) === parent).length;
        if (inDir >= MAX_TEMPS) return -E.ENOSPC;
        const temp = newTemp({
          mode: req.arg.mode & 0o7777,
          uid: req.uid,
          gid: req.gid,
          ino: virtualIno(path) + this.#nextFh,
        });
        this.#temps.set(path, temp);
        const n = this.#entry(out, path);
        if (n < 0) return n;
        return this.#openOut(out, n, this.#fh({ t: "temp", temp }), 1);
      }
      const w = this.#writer(path, req, { truncate: true });
      if (typeof w === "number") return w;
      const node = this.nodes.ref(path);
      const n = putEntry(out, {
        nodeid: node.id,
        attr: virtualAttr(path, {
          mode: S.IFREG | 0o644,
          size: 0,
          uid: req.uid,
          time: this.#start,
        }),
        ttl: 0,
      });
      return this.#openOut(out, n, this.#fh({ t: "control", fd: -1, writer: w }), 1);
    }
    if (kind === "stage") {
      // a new agent entry, written in full before its rename to agent/<n>
      const n = stagedName(name);
      if (n === null || !isName(n) || !this.#mayChange(req.uid, n)) return -E.EACCES;
      if (typeof this.#dir.lstat(this.#backing(`agent/${n}.d`)) === "number") return -E.ENOENT;
    } else {
      const s = this.#structural(parent, name, { uid: req.uid });
      if (typeof s === "number") return s;
    }
    const keep = libc.O.ACCMODE | libc.O.APPEND | libc.O.TRUNC | 0o4010000;
    const p = this.#backing(path);
    let fd = this.#dir.open(
      p,
      (flags & keep) | libc.O.CREAT | libc.O.EXCL | libc.O.NOFOLLOW,
      req.arg.mode & 0o7777,
    );
    if (fd === -E.EEXIST && !(flags & libc.O.EXCL)) {
      fd = this.#dir.open(p, (flags & keep) | libc.O.NOFOLLOW); // appeared meanwhile: open, never chown
    } else if (fd >= 0) {
      const [uid, gid] = this.#ownerOf(req, parent);
      libc.fchown(fd, uid, gid);
    }
    if (fd < 0) return fd;
    const n = this.#entry(out, path);
    if (n < 0) {
      libc.close(fd);
      return n;
    }
    return this.#openOut(out, n, this.#fh({ t: "fd", fd }), 0);
  }

  /** READ. */
  read(req: Request, out: Uint8Array): number {
    const h = this.#handles.get(req.arg.fh);
    if (!h) return -E.EBADF;
    const { offset, size } = req.arg;
    const dest = out.subarray(0, Math.min(size, out.length));
    let src: Uint8Array;
    switch (h.t) {
      case "fd":
        return libc.pread(h.fd, dest, offset);
      case "control":
        if (!h.writer) return libc.pread(h.fd, dest, offset);
        src = h.writer.bytes();
        break;
      case "temp":
        src = h.temp.data.subarray(0, h.temp.len);
        break;
      case "bytes":
        src = h.data;
        break;
      default:
        return -E.EISDIR;
    }
    const part = src.subarray(Math.min(offset, src.length), Math.min(offset + size, src.length));
    dest.set(part);
    return part.length;
  }

  /** WRITE. */
  write(req: Request, out: Uint8Array): number {
    const h = this.#handles.get(req.arg.fh);
    if (!h) return -E.EBADF;
    let n: number;
    switch (h.t) {
      case "fd":
        n = libc.pwrite(h.fd, req.data, req.arg.offset);
        break;
      case "control":
        n = h.writer ? h.writer.write(req.arg.offset, req.data) : -E.EBADF;
        break;
      case "temp":
        n = put(h.temp, req.arg.offset, req.data);
        h.temp.mtime = h.temp.ctime = Date.now() / 1000;
        break;
      default:
        return -E.EBADF;
    }
    if (n < 0) return n;
    const [v, o] = outView(out);
    return encode(WRITE_OUT, v, o, { size: n }) - o;
  }

  /** FLUSH (every close): a pending control write is judged here and its errno reaches close(2). */
  flush(req: Request): number {
    const h = this.#handles.get(req.arg.fh);
    return h?.t === "control" && h.writer ? h.writer.flush() : 0;
  }

  /** FSYNC. */
  fsync(req: Request): number {
    const h = this.#handles.get(req.arg.fh);
    if (h?.t === "fd") return libc.fsync(h.fd, { data: !!(req.arg.fsync_flags & 1) });
    if (h?.t === "control" && h.writer) return h.writer.flush();
    return 0;
  }

  /** RELEASE. */
  release(req: Request): number {
    const h = this.#handles.get(req.arg.fh);
    this.#handles.delete(req.arg.fh);
    if (h?.t === "fd") libc.close(h.fd);
    if (h?.t === "control") {
      if (h.fd >= 0) libc.close(h.fd);
      h.writer?.flush(); // nobody is left to hear an error: FLUSH already reported it
    }
    return 0;
  }

  /** STATFS: the backing file system's counters. */
  statfs(out: Uint8Array): number {
    const s = this.#dir.statvfs();
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

  /** OPENDIR: snapshots the listing (backing entries plus virtual ones) as wire records. */
  opendir(req: Request, out: Uint8Array): number {
    const path = this.#path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const kind = this.#kind(path);
    const self = this.#stat(path);
    if (typeof self === "number") return self;
    const list = new Listing();
    list.addName(DOT, DT.DIR, self.ino);
    list.addName(DOTDOT, DT.DIR, 1);
    const add = (name: string, type: number) =>
      list.addName(enc.encode(name), type, virtualIno(join(path, name)));
    if (kind === "root") {
      for (const name of ROOT_NAMES) add(name, name === "status" ? DT.REG : DT.DIR);
      return this.#openOut(out, 0, this.#fh({ t: "dir", list }), 0);
    }
    if (path !== "bin" && path !== "agent" && kind !== "cdir") {
      // plain directories: straight from getdents64 into records, no object per entry
      const r = this.#dir.scan(this.#backing(path), (b, s, e, type, ino) => {
        list.add(b, s, e, type, ino);
      });
      if (r < 0) return r;
      return this.#openOut(out, 0, this.#fh({ t: "dir", list }), 0);
    }
    const listed = this.#dir.list(this.#backing(path));
    if (typeof listed === "number") return listed;
    // Under agent/ the `.sock` aliases are virtual, one per definition: a backing alias left by
    // the runtime for a removed agent is not shown.
    const shown = path === "agent"
      ? listed.filter((e) => !dec.decode(e.name).endsWith(".sock"))
      : listed;
    for (const e of shown) list.addName(e.name, e.type, e.ino);
    // virtual names join the listing unless the backing tree already has them
    const names = new Set(shown.map((e) => dec.decode(e.name)));
    const extra: [string, number][] = [];
    if (path === "bin") { for (const b of this.#bins) extra.push([b, DT.REG]); }
    if (path === "agent") {
      for (const n of names) {
        if (!n.endsWith(".d") && !n.endsWith(".sock") && !n.startsWith(".")) {
          extra.push([`${n}.sock`, DT.LNK]);
        }
      }
    }
    if (kind === "cdir") {
      for (const t of this.#temps.keys()) {
        if (parentOf(t) === path) extra.push([baseOf(t), DT.REG]);
      }
    }
    for (const [n, type] of extra) if (!names.has(n)) add(n, type);
    return this.#openOut(out, 0, this.#fh({ t: "dir", list }), 0);
  }

  /** READDIR: whole records from the snapshot; offsets are indexes + 1. */
  readdir(req: Request, out: Uint8Array): number {
    const h = this.#handles.get(req.arg.fh);
    if (h?.t !== "dir") return -E.EBADF;
    return h.list.page(req.arg.offset, Math.min(req.arg.size, out.length), out);
  }

  /** RELEASEDIR. */
  releasedir(req: Request): number {
    this.#handles.delete(req.arg.fh);
    return 0;
  }

  #xattrWrite(req: Request): number {
    const path = this.#path(req.nodeid);
    if (path === null) return -E.ENOENT;
    // ENOTSUP tells tools (sed -i, cp -a copying ACLs) there is nothing to preserve.
    const k = this.#kind(path);
    return k === "rw" || k === "control" ? -E.ENOTSUP : -E.EROFS;
  }

  /** Live file handles (status, tests). */
  get handleCount(): number {
    return this.#handles.size;
  }
}
