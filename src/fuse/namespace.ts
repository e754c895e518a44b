/** Names: MKDIR/MKNOD/SYMLINK/LINK/UNLINK/RMDIR/RENAME, passthrough in home/shared, temps in control dirs, agents through agents.ts. */
import { RENAME } from "../abi/fuse.ts";
import { ERRNO, toCtxError } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import type { At } from "../sys/dir.ts";
import { putEntry, S } from "./attr.ts";
import { baseOf, isTempName } from "./classify.ts";
import type { Request } from "./conn.ts";
import type { Agents } from "./agents.ts";
import { asCaller, CAP_MKNOD, holdsCap } from "./caller.ts";
import { join } from "./nodes.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;
/** File types mknod(2) makes: FIFOs and unix sockets (bind) for anyone, devices only with CAP_MKNOD. */
const FIFO = 0o010000;
const SOCK = 0o140000;
const CHR = 0o020000;
const BLK = 0o060000;

/** The name operations, over the shared {@link Tree}. */
export class Namespace {
  #t: Tree;
  #agents: Agents;

  constructor(tree: Tree, agents: Agents) {
    this.#t = tree;
    this.#agents = agents;
  }

  /**
   * Makes a new name with `make`: as the caller (born theirs, nothing to chown by name afterwards,
   * which a swapped name could redirect), except in `home/` itself, whose backing directory is
   * root's (a user's `home/<uid>` is made by the daemon and given to them; nobody else can swap
   * a name there).
   */
  #make(req: Request, parent: string, path: string, make: (at: At) => number): number {
    const t = this.#t;
    const p = t.at(path);
    if (typeof p === "number") return p;
    if (parent !== "home") return asCaller(req, () => make(p));
    const r = make(p);
    if (r === 0) t.dir.lchown(p, { uid: req.uid, gid: req.gid });
    return r;
  }

  /** SYMLINK (names: link name, target). */
  symlink(req: Request, out: Uint8Array): number {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const s = t.structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const target = libc.cstr(req.names[1]);
    const r = this.#make(req, parent, s.path, (p) => t.dir.symlink(target, p));
    return r < 0 ? r : t.entry(out, s.path);
  }

  /**
   * MKNOD: regular files, FIFOs and unix sockets (what bind(2) makes) for every user, as the
   * caller. Device nodes only for a caller holding CAP_MKNOD in this daemon's user namespace (the
   * kernel checks it too), also made as the caller: root makes them; another holder's fsuid drops
   * CAP_MKNOD in the backing call (EPERM), since giving them a node made by the daemon would take
   * a chown by name. The mount is `nodev`: a device made here never opens through it.
   */
  mknod(req: Request<"MKNOD">, out: Uint8Array): number {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const s = t.structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const type = req.arg.mode & S.IFMT;
    const device = type === CHR || type === BLK;
    if (!device && type !== S.IFREG && type !== FIFO && type !== SOCK) return -E.EPERM;
    if (device && !holdsCap(req.pid, CAP_MKNOD)) return -E.EPERM;
    const { mode, rdev } = req.arg;
    const r = this.#make(req, parent, s.path, (p) => t.dir.mknod(p, { mode, dev: rdev }));
    return r < 0 ? r : t.entry(out, s.path);
  }

  /** MKDIR. */
  mkdir(req: Request<"MKDIR">, out: Uint8Array): number {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const agent = this.#agents.of(parent, req.names[0], ".d");
    if (agent !== null) return this.#agents.mkdir(req, out, agent);
    const s = t.structural(parent, req.names[0], { uid: req.uid, dir: true });
    if (typeof s === "number") return s;
    const mode = req.arg.mode & 0o7777;
    const r = this.#make(req, parent, s.path, (p) => t.dir.mkdir(p, mode));
    return r < 0 ? r : t.entry(out, s.path);
  }

  /** UNLINK: plain files in home/shared, in-memory temps in control dirs, agents by their owner; the rest is EROFS. */
  unlink(req: Request): number | Promise<number> {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const path = join(parent, req.names[0]);
    if (t.temps.delete(path)) {
      t.nodes.drop(path);
      return 0;
    }
    const agent = this.#agents.unlink(req, parent);
    if (agent !== null) return agent;
    const s = t.structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    const p = t.at(path);
    if (typeof p === "number") return p;
    const r = t.dir.unlink(p);
    if (r === 0) t.nodes.drop(path);
    return r;
  }

  /** RMDIR. */
  rmdir(req: Request): number {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const agent = this.#agents.of(parent, req.names[0], ".d");
    if (agent !== null) return this.#agents.rmdir(req, agent);
    const s = t.structural(parent, req.names[0], { uid: req.uid, dir: true });
    if (typeof s === "number") return s;
    const p = t.at(s.path);
    if (typeof p === "number") return p;
    const r = t.dir.rmdir(p);
    if (r === 0) {
      t.nodes.drop(s.path);
      t.back.forget(s.path);
    }
    return r;
  }

  /** RENAME / RENAME2: within home/shared; a temp onto a control commits it through validation. */
  rename(req: Request<"RENAME" | "RENAME2">, flags: number): number | Promise<number> {
    const t = this.#t;
    const fromDir = t.path(req.nodeid);
    const toDir = t.path(req.arg.newdir);
    if (fromDir === null || toDir === null) return -E.ENOENT;
    if (fromDir === "" || toDir === "") return -E.EACCES;
    const from = join(fromDir, req.names[0]);
    const to = join(toDir, req.names[1]);
    const fk = t.kind(from), tk = t.kind(to);
    if (fk === "rw" && tk === "rw") {
      if (toDir === "home" && req.uid !== 0) return -E.EACCES; // home/ holds only uid dirs
      const [f, g] = [t.at(from), t.at(to)];
      if (typeof f === "number") return f;
      if (typeof g === "number") return g;
      const r = t.dir.rename(f, g, { flags });
      if (r < 0) return r;
      t.back.forget(from); // a cached fd follows its directory, not the name
      t.back.forget(to);
      if (flags & RENAME.EXCHANGE) t.nodes.exchange(from, to);
      else t.nodes.move(from, to);
      return 0;
    }
    if (fk === "stage" && toDir === "agent" && fromDir === "agent") {
      return this.#agents.rename(req, flags);
    }
    const temp = t.temps.get(from);
    if (temp && tk === "control") {
      if (fromDir !== toDir) return -E.EXDEV;
      if (flags & RENAME.EXCHANGE) return -E.EINVAL;
      const exists = t.temps.has(to) || typeof t.lstat(to) !== "number";
      if (flags & RENAME.NOREPLACE && exists) return -E.EEXIST;
      if (t.temps.has(to) || isTempName(baseOf(to))) {
        t.temps.delete(to);
        t.temps.set(to, temp);
      } else {
        try {
          t.o.commit(to, temp.data.slice(0, temp.len), { uid: req.uid, gid: req.gid });
        } catch (e) {
          const err = toCtxError(e, to);
          t.o.refused?.(to, req.uid, err); // rename(2) carries only the errno
          return -(E[err.errno] ?? E.EIO);
        }
      }
      t.temps.delete(from);
      t.nodes.move(from, to);
      return 0;
    }
    if ((fk === "rw") !== (tk === "rw")) return -E.EXDEV; // mv falls back to copy + unlink
    return -E.EROFS;
  }

  /**
   * LINK (hard links inside home/shared). A file without a name (O_TMPFILE, or unlinked while
   * open) is linked through its open fd (`linkat` of `/proc/self/fd/<fd>`), as the caller.
   */
  link(req: Request<"LINK">, out: Uint8Array): number {
    const t = this.#t;
    const from = t.path(req.arg.oldnodeid);
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    // only a file opened (or made) in home/shared: nothing of the projection gets a name there
    const open = from === null ? t.openFd(req.arg.oldnodeid, { plain: true }) : null;
    if (from === null && open === null) return -E.ENOENT;
    const s = t.structural(parent, req.names[0], { uid: req.uid });
    if (typeof s === "number") return s;
    if (from !== null && t.kind(from) !== "rw") return -E.EXDEV;
    const g = t.at(s.path);
    if (typeof g === "number") return g;
    let r: number;
    if (open !== null) r = asCaller(req, () => t.dir.linkFd(open, g));
    else {
      const f = t.at(from as string); // from !== null: open is null only then
      if (typeof f === "number") return f;
      r = asCaller(req, () => t.dir.link(f, g));
    }
    if (r < 0) return r;
    const a = t.stat(s.path);
    if (typeof a === "number") return a;
    // The kernel expects the existing inode back: the new name becomes an alias of that node.
    const old = t.nodes.get(req.arg.oldnodeid)!; // t.path() above found it
    const node = t.nodes.alias(old, s.path, String(a.ino));
    return putEntry(out, { nodeid: node.id, attr: a, ttl: t.ttl("rw", s.path) });
  }

  /** READLINK: the socket alias target, or the backing link's. */
  readlink(req: Request): number | Uint8Array {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    if (t.kind(path) === "sock") return new TextEncoder().encode(t.sockTarget(path));
    const p = t.at(path);
    return typeof p === "number" ? p : t.dir.readlink(p);
  }
}
