/** Directory handles: OPENDIR snapshots a listing (backing entries plus virtual names), READDIR pages it. */
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { virtualIno } from "./attr.ts";
import { baseOf, parentOf, ROOT_NAMES } from "./classify.ts";
import type { Request } from "./conn.ts";
import { Listing } from "./listing.ts";
import { join } from "./nodes.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;
const enc = new TextEncoder();
const dec = new TextDecoder();
const DT = { DIR: 4, REG: 8, LNK: 10 } as const;
const DOT = enc.encode(".");
const DOTDOT = enc.encode("..");

/** The directory operations, over the shared {@link Tree}. */
export class Dirs {
  #t: Tree;

  constructor(tree: Tree) {
    this.#t = tree;
  }

  /** OPENDIR: snapshots the listing (backing entries plus virtual ones) as wire records. */
  opendir(req: Request<"OPENDIR">, out: Uint8Array): number {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const kind = t.kind(path);
    const self = t.stat(path);
    if (typeof self === "number") return self;
    const list = new Listing();
    list.addName(DOT, DT.DIR, self.ino);
    list.addName(DOTDOT, DT.DIR, 1);
    const add = (name: string, type: number) =>
      list.addName(enc.encode(name), type, virtualIno(join(path, name)));
    if (kind === "root") {
      for (const name of ROOT_NAMES) add(name, name === "status" ? DT.REG : DT.DIR);
      return t.openOut(out, 0, t.fh({ t: "dir", list }), 0);
    }
    if (path !== "bin" && path !== "agent" && kind !== "cdir") {
      // plain directories: straight from getdents64 into records, no object per entry
      const at = t.at(path);
      if (typeof at === "number") return at;
      const r = t.dir.scan(at, (b, s, e, type, ino) => {
        list.add(b, s, e, type, ino);
      });
      if (r < 0) return r;
      return t.openOut(out, 0, t.fh({ t: "dir", list }), 0);
    }
    const at = t.at(path);
    if (typeof at === "number") return at;
    const listed = t.dir.list(at);
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
    if (path === "bin") { for (const b of t.bins) extra.push([b, DT.REG]); }
    if (path === "agent") {
      for (const n of names) {
        if (!n.endsWith(".d") && !n.endsWith(".sock") && !n.startsWith(".")) {
          extra.push([`${n}.sock`, DT.LNK]);
        }
      }
    }
    if (kind === "cdir") {
      // a model's computed `limit` is listed whether or not the backing tree stores one
      if (t.o.projected?.(join(path, "limit")) != null) extra.push(["limit", DT.REG]);
      for (const p of t.temps.keys()) {
        if (parentOf(p) === path) extra.push([baseOf(p), DT.REG]);
      }
    }
    for (const [n, type] of extra) if (!names.has(n)) add(n, type);
    return t.openOut(out, 0, t.fh({ t: "dir", list }), 0);
  }

  /** READDIR: whole records from the snapshot; offsets are indexes + 1. */
  readdir(req: Request<"READDIR">, out: Uint8Array): number {
    const h = this.#t.handles.get(req.arg.fh);
    if (h?.t !== "dir") return -E.EBADF;
    return h.list.page(req.arg.offset, Math.min(req.arg.size, out.length), out);
  }

  /**
   * READDIRPLUS: the READDIR records, each headed by the entry a LOOKUP of its name would answer
   * (node reference, attributes, timeouts), so `ls -l`, `find` and `rm -rf` cost no LOOKUP per
   * entry. Only plain home/shared entries with a nonzero timeout carry one, made exactly as LOOKUP
   * makes it (`Tree.entry`: lstat beneath the generation, nothing followed, attributes that never
   * depend on the caller); everything else (`.`, `..`, controls, projections, agent homes written
   * behind the mount, virtual names) goes out with node id 0 and keeps its own LOOKUP, attributes
   * and timeouts. Entries the kernel still holds fresh (answered within their timeout, not
   * opened for writing since) are left out too: a warm `ls -l` costs no stat per entry.
   */
  readdirplus(req: Request<"READDIRPLUS">, out: Uint8Array): number {
    const t = this.#t;
    const h = t.handles.get(req.arg.fh);
    if (h?.t !== "dir") return -E.EBADF;
    const dir = t.path(req.nodeid);
    const size = Math.min(req.arg.size, out.length);
    const now = performance.now();
    return h.list.pagePlus(req.arg.offset, size, out, (raw, dest) => {
      if (
        dir === null ||
        (raw[0] === 0x2e && (raw.length === 1 || (raw.length === 2 && raw[1] === 0x2e)))
      ) return;
      const path = join(dir, dec.decode(raw));
      // still fresh in the kernel (an entry reply within its timeout): nothing to add
      const known = t.nodes.at(path);
      if (known !== undefined && known.path === path && (known.until ?? 0) > now) return;
      const info = t.info(path);
      if (info.kind !== "rw" || info.ttl === 0) return;
      if (t.entry(dest, path) < 0) dest.fill(0); // gone meanwhile: the kernel looks it up
    });
  }

  /**
   * FSYNCDIR: fsyncs the backing directory (tmp + rename + fsync(dir) reaches the disk). Opened
   * for the call without following a symlink and without blocking (O_DIRECTORY: anything else
   * fails); virtual directories have nothing to sync.
   */
  fsyncdir(req: Request<"FSYNCDIR">): number {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const kind = t.kind(path);
    if (kind === "root" || kind === "none") return 0;
    const at = t.at(path);
    if (typeof at === "number") return at;
    const fd = t.dir.open(at, libc.O.RDONLY | libc.O.DIRECTORY | libc.O.NONBLOCK);
    if (fd < 0) return fd;
    const r = libc.fsync(fd, { data: !!(req.arg.fsync_flags & 1) });
    libc.close(fd);
    return r;
  }

  /** RELEASEDIR. */
  releasedir(req: Request<"RELEASEDIR">): number {
    this.#t.handles.delete(req.arg.fh);
    return 0;
  }
}
