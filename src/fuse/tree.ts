/** The projection's shared state: options, backing dir, nodes, handles, temps, and what each path is (kind, attributes, entries). */
import { Why } from "./why.ts";
import { type Attr, FOPEN } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import type { At, Dir } from "../sys/dir.ts";
import { Backing, noMemo, type Place } from "./backing.ts";
import {
  fromStat,
  outView,
  putAttr,
  putEntry,
  putRawEntry,
  rawStat,
  S,
  virtualAttr,
} from "./attr.ts";
import { baseOf, classify, type Kind, parentOf } from "./classify.ts";
import type { Commit, ControlWriter, Refused, Temp } from "./control.ts";
import type { Listing } from "./listing.ts";
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
  /** Applies the same rules as `commit` and writes nothing (judging an open handle's content). */
  check: Commit;
  /** A control write was refused (once per open handle): the daemon logs the rule it broke. */
  refused?: Refused;
  /** Whether a control name may be written: "control", "readonly" (EROFS) or "unknown" (EINVAL). */
  controlKind: (abiPath: string) => "control" | "readonly" | "unknown";
  /** Whether a control can hold secrets (`env`): shown 0600 and opened only by its owner and root. */
  secret: (abiPath: string) => boolean;
  /**
   * The text of a file the mount computes, or null: a model's `limit` (read-only, 0444), a model
   * entry with its `context_length=` line computed (the entry's own attributes, this size).
   */
  projected?: (abiPath: string) => string | null;
  /** Owner uid of the object a control directory belongs to. */
  owner: (abiPath: string) => number;
  /** Whether `agent/<name>` is still being created (its entry is absent). */
  creating: (name: string) => boolean;
  /** `agent/<name>` was renamed into place through the mount: serve it (the reply waits for this). */
  onAgent?: (name: string) => void | Promise<unknown>;
  /** `agent/<name>` was removed through the mount: stop serving it. */
  onAgentGone?: (name: string) => void | Promise<unknown>;
}

/** What an open file handle serves. */
export type Handle =
  /**
   * A backing file; `node`: the node it was opened on (its attributes once every name is gone);
   * `plain`: opened in home/shared (or made there with O_TMPFILE), so LINK may name it there.
   */
  | { t: "fd"; fd: number; node?: Node; plain?: boolean }
  | { t: "bytes"; data: Uint8Array }
  | { t: "control"; fd: number; writer: ControlWriter | null }
  | { t: "temp"; temp: Temp }
  | { t: "dir"; list: Listing };

/** What a path is, cached: its kind, timeout, and where its backing calls go (parent dir + name). */
export interface PathInfo extends Place {
  path: string;
  kind: Kind;
  ttl: number;
}

const E = ERRNO;
const enc = new TextEncoder();
/**
 * `agent/` and `home/` are shown sticky and world-writable, so that under default_permissions
 * the kernel lets an unprivileged user ask for a creation there at all; the rules in agents.ts
 * and namespace.ts decide what may be created (the sticky bit keeps others' entries from being
 * removed or renamed).
 */
const SHARED_DIR = 0o1777;
/** Owner permission bits only: what secret controls and temps in control dirs show. */
const PRIVATE = 0o700;

/**
 * True for `home/<uid>/agent/...` and `shared/<space>/agent/...`: written behind the mount's back
 * (by the runtime, and by agents, whose sandboxes bind these directories).
 */
function daemonWritten(path: string): boolean {
  const top = path.startsWith("home/") ? 5 : path.startsWith("shared/") ? 7 : -1;
  if (top < 0) return false;
  const slash = path.indexOf("/", top);
  return slash > 0 && path.startsWith("agent", slash + 1) &&
    (path.length === slash + 6 || path[slash + 6] === "/");
}

/** The state every operation shares, and the path facts they all need. */
export class Tree {
  readonly o: CtxFsOptions;
  /** The last refused control write of each writer, for `user.cortexfs.refused`. */
  readonly why = new Why();
  readonly nodes = new Nodes();
  /** The backing tree: parent directories reached without symlinks (see backing.ts). */
  readonly back: Backing;
  /** The generation directory and the calls on names (src/sys/dir.ts). */
  readonly dir: Dir;
  readonly bins: Set<string>;
  /** Open file and directory handles by fh. */
  readonly handles = new Map<number, Handle>();
  /** In-memory temps in control directories, by ABI path. */
  readonly temps = new Map<string, Temp>();
  /** Mount start (unix seconds): the time of virtual files that never change. */
  readonly start = Date.now() / 1000;
  /** The /dev/fuse fd when passthrough was negotiated (INIT), else -1. */
  passthroughFd = -1;
  #nextFh = 1;
  /** Bytes of the last `/ctx/status` text built (null until the first). */
  #statusSize: number | null = null;
  // Kind, backing C path and timeout depend only on the path string: one cached record per path
  // (bounded), because every request needs them and building them costs more than the lstat.
  #infos = new Map<string, PathInfo>();
  /** What {@link stat} fills when asked to reuse an object. */
  #attr: Attr = virtualAttr("", { mode: 0, size: 0, time: 0 });

  constructor(options: CtxFsOptions) {
    this.o = options;
    this.back = new Backing(options.root);
    this.dir = this.back.dir;
    this.bins = new Set(Object.keys(options.bins));
  }

  /** The current path of node `id`, or null when the kernel's node is gone or has no name. */
  path(id: number): string | null {
    return this.nodes.get(id)?.path ?? null;
  }

  /** The cached facts of `path`. */
  info(path: string): PathInfo {
    let i = this.#infos.get(path);
    if (i === undefined) {
      if (this.#infos.size > 100_000) this.#infos.clear();
      const kind = classify(path, this.bins);
      i = {
        path,
        kind,
        ttl: this.#ttlOf(kind, path),
        parent: parentOf(path),
        name: libc.cstr(path === "" ? "." : baseOf(path)),
        fresh: daemonWritten(path),
        memo: noMemo(),
      };
      this.#infos.set(path, i);
    }
    return i;
  }
  /** The record of a node's current path, memoized on the node (a rename gives it a new path). */
  nodeInfo(n: Node & { path: string }): PathInfo {
    const m = n.memo as PathInfo | undefined;
    if (m !== undefined && m.path === n.path) return m;
    return (n.memo = this.info(n.path));
  }
  /** The kind of `path`. */
  kind(path: string): Kind {
    return this.info(path).kind;
  }
  /** Where a backing call on `path` goes: its parent directory's fd and its name, or -errno. */
  at(path: string): At | number {
    return this.back.at(this.info(path));
  }
  /** lstat of the backing `path` itself (nothing on the way followed): the shared Stat or -errno. */
  lstat(path: string, info: PathInfo = this.info(path)): libc.Stat | number {
    const fd = this.back.parentFd(info);
    if (fd < 0) return fd;
    const st = this.dir.lstatIn(fd, info.name);
    this.back.seen(path, st, info);
    return st;
  }
  /**
   * {@link lstat} left undecoded in libc's stat buffer (attr.ts `rawStat`, `putRawAttr`): 0 or
   * -errno. Only for a path whose attributes are the backing file's as they are ({@link plain}).
   */
  lstatRaw(path: string, info: PathInfo): number {
    const fd = this.back.parentFd(info);
    if (fd < 0) return fd;
    const r = this.dir.lstatRawIn(fd, info.name);
    // Only a path that is a cached directory has its inode checked (see Backing.seen).
    const d = this.back.cachedAt(path, info);
    if (d !== null && (r < 0 || rawStat.ino() !== d.ino || rawStat.dev() !== d.dev)) {
      this.back.forget(path);
    }
    return r;
  }
  /** Whether {@link stat} answers `info`'s path with its backing file's attributes unchanged. */
  plain(info: PathInfo): boolean {
    return (info.kind === "rw" || info.kind === "stage") && info.path !== "home";
  }

  /** The entry/attribute timeout of `path` seen as `kind`. */
  ttl(kind: Kind, path: string): number {
    const i = this.info(path);
    return kind === i.kind ? i.ttl : this.#ttlOf(kind, path);
  }
  #ttlOf(kind: Kind, path: string): number {
    // The root never changes; plain home/shared files change only through this mount. Agent
    // homes and sessions are written straight into the backing tree by the runtime and by
    // sandboxed tools, so their attributes are never cached (a reader sees a run at once).
    if (kind === "root") return this.o.ttl;
    return kind === "rw" && !daemonWritten(path) ? this.o.ttl : 0;
  }

  /** The target of the `agent/<n>.sock` alias. */
  sockTarget(path: string): string {
    return `${this.o.run}/${path}`;
  }

  /** The bytes of a virtual file (status, launchers); null for anything else. */
  virtualText(kind: Kind, path: string): string | null {
    if (kind === "status") {
      const text = this.o.status();
      this.#statusSize = enc.encode(text).length;
      return text;
    }
    if (kind === "launcher") return this.o.bins[baseOf(path)];
    if (kind === "control" || kind === "ro") return this.o.projected?.(path) ?? null;
    return null;
  }

  /**
   * The attributes of `path`, or -errno. `reuse`: a backing file's come in one object this tree
   * reuses, valid until the next call (for a caller that encodes them at once).
   */
  stat(path: string, info: PathInfo = this.info(path), reuse = false): Attr | number {
    const kind = info.kind;
    const now = this.start;
    switch (kind) {
      case "none":
        return -E.ENOENT;
      case "root":
        return virtualAttr("", { mode: S.IFDIR | 0o755, size: 4096, time: now, nlink: 2 + 5 });
      case "status":
        // The size of the last text an OPEN built (each open reads its own snapshot, served with
        // direct_io, so a reader gets the whole current text whatever size a stat said): a stat
        // of /ctx/status never reads every agent's projections, which with 10,000 agents held
        // the mount for half a second per stat.
        this.#statusSize ??= enc.encode(this.o.status()).length;
        return virtualAttr(path, {
          mode: S.IFREG | 0o444,
          size: this.#statusSize,
          time: Date.now() / 1000,
        });
      case "launcher":
        return virtualAttr(path, {
          mode: S.IFREG | 0o555,
          size: enc.encode(this.o.bins[baseOf(path)]).length,
          time: now,
        });
      case "sock": {
        const def = this.lstat(path.slice(0, -5));
        if (typeof def === "number") return def;
        return virtualAttr(path, {
          mode: S.IFLNK | 0o777,
          size: enc.encode(this.sockTarget(path)).length,
          time: now,
        });
      }
      case "control":
        return this.#controlAttr(path, info);
      case "cdir": {
        const st = this.lstat(path, info);
        if (typeof st === "number") return st;
        const a = fromStat(st);
        a.uid = this.o.owner(path + "/x");
        return a;
      }
      case "ro":
        return this.#roAttr(path, info);
      case "rw":
      case "stage": {
        const st = this.lstat(path, info);
        if (typeof st === "number") return st;
        const a = fromStat(st, reuse ? this.#attr : undefined);
        // (keep plain() in step: this is the one change made to a backing file's attributes here)
        if (path === "home") a.mode = S.IFDIR | SHARED_DIR; // anyone may make home/<own uid>
        return a;
      }
    }
  }

  /** A control's attributes: its projection's, a temp's (its writer's alone), or the backing file's. */
  #controlAttr(path: string, info: PathInfo): Attr | number {
    const now = this.start;
    const text = this.o.projected?.(path) ?? null;
    if (text !== null) {
      const size = enc.encode(text).length;
      return virtualAttr(path, { mode: S.IFREG | 0o444, size, time: now });
    }
    const temp = this.temps.get(path);
    if (temp) {
      // A temp is one writer's draft of a control, maybe a secret one (`sed -i env`): its
      // creator's alone, whatever mode it asked for.
      const mode = S.IFREG | (temp.mode & PRIVATE);
      return {
        ...virtualAttr(path, { mode, size: temp.len, time: temp.mtime }),
        ino: temp.ino,
        uid: temp.uid,
        gid: temp.gid,
      };
    }
    const st = this.lstat(path, info);
    if (typeof st === "number") return st;
    const a = fromStat(st);
    if ((a.mode & S.IFMT) === S.IFREG) {
      a.uid = this.o.owner(path);
      a.blksize = 65536; // stdio then writes a whole control in one write(2)
      if (this.o.controlKind(path) !== "control") a.mode &= ~0o222;
      // The owner's and root's only, even while a backing file is still 0644 (an older tree
      // before migration 4, a file written behind the mount's back): the kernel checks this.
      if (this.o.secret(path)) a.mode &= S.IFMT | PRIVATE;
    } else if ((a.mode & S.IFMT) !== S.IFLNK) a.mode &= ~0o222;
    return a;
  }

  /** A read-only entry's attributes (a definition, a model entry, `agent/`): the backing file's, adjusted. */
  #roAttr(path: string, info: PathInfo): Attr | number {
    const st = this.lstat(path, info);
    if (typeof st === "number") return st;
    const a = fromStat(st);
    // a model entry's `context_length=` line says the computed limit (bridge.ts)
    const text = path.startsWith("model/") ? this.o.projected?.(path) ?? null : null;
    if (text !== null) a.size = enc.encode(text).length;
    if (path === "agent") a.mode = S.IFDIR | SHARED_DIR; // anyone may start an agent
    else if ((a.mode & S.IFMT) !== S.IFLNK) a.mode &= ~0o222;
    // An agent entry is root's in the backing tree; its owner is shown (sticky agent/: the
    // owner may remove or replace it).
    if (info.parent === "agent" && (a.mode & S.IFMT) === S.IFREG) {
      a.uid = this.o.owner(`${path}.d/owner`);
    }
    return a;
  }

  /**
   * Writes the `fuse_entry_out` of `path` (one more kernel reference to its node); length or
   * -errno. `known`: the node at `path`, when the caller has it already.
   */
  entry(out: Uint8Array, path: string, known: Node | undefined = this.nodes.at(path)): number {
    const info = known?.path === path
      ? this.nodeInfo(known as Node & { path: string })
      : this.info(path);
    if (this.plain(info)) {
      // The backing file's attributes as they are: copied from the stat buffer into the reply.
      const r = this.lstatRaw(path, info);
      if (r < 0) return r;
      const mode = rawStat.mode();
      const key = info.kind === "rw" && rawStat.nlink() > 1 && (mode & S.IFMT) !== S.IFDIR
        ? String(rawStat.ino())
        : undefined;
      const node = known !== undefined && key === undefined
        ? this.nodes.reref(known)
        : this.nodes.ref(path, key);
      node.until = info.ttl > 0 ? performance.now() + info.ttl * 1000 : 0;
      node.ino = rawStat.ino();
      return putRawEntry(out, node.id, info.ttl);
    }
    const a = this.stat(path, info, true);
    if (typeof a === "number") return a;
    // A file with several names (hard links) is one kernel inode: same node for every name.
    const key = info.kind === "rw" && a.nlink > 1 && (a.mode & S.IFMT) !== S.IFDIR
      ? String(a.ino)
      : undefined;
    const node = known !== undefined && key === undefined
      ? this.nodes.reref(known)
      : this.nodes.ref(path, key);
    node.until = info.ttl > 0 ? performance.now() + info.ttl * 1000 : 0;
    node.ino = a.ino;
    return putEntry(out, { nodeid: node.id, attr: a, ttl: info.ttl });
  }

  /** Writes the `fuse_attr_out` of `path` after a change (a pending new control counts); length or -errno. */
  attrReply(out: Uint8Array, path: string, h?: Handle): number {
    const a = this.stat(path);
    if (typeof a === "number") {
      const w = a === -E.ENOENT ? this.pending(path, h) : null;
      return w ? putAttr(out, { attr: this.pendingAttr(path, w), ttl: 0 }) : a;
    }
    const n = this.nodes.at(path);
    if (n !== undefined) n.ino = a.ino;
    return putAttr(out, { attr: a, ttl: this.ttl(this.kind(path), path) });
  }

  /**
   * The writer of a new control that an open handle created and has not committed yet (the
   * kernel asks for its attributes, with or without the handle, before the first write).
   */
  pending(path: string, h?: Handle): ControlWriter | null {
    if (h?.t === "control" && h.writer) return h.writer;
    for (const x of this.handles.values()) {
      // a spoiled handle never commits: its control is not coming
      if (x.t === "control" && x.writer?.path === path && !x.writer.failed) return x.writer;
    }
    return null;
  }
  /** The attributes of a pending new control. */
  pendingAttr(path: string, w: ControlWriter): Attr {
    const mode = S.IFREG | this.controlMode(path);
    return virtualAttr(path, { mode, size: w.len, uid: w.uid, gid: w.gid, time: this.start });
  }

  /** Permission bits of a control at `path` as the mount shows it: 0600 for a secret one, else 0644. */
  controlMode(path: string): number {
    return this.o.secret(path) ? 0o600 : 0o644;
  }

  /** Whether `uid` may open the control at `path`: anyone a plain one, only the owner and root a secret one. */
  mayRead(path: string, uid: number): boolean {
    return uid === 0 || !this.o.secret(path) || uid === this.o.owner(path);
  }

  /** Who may change the structure under `parent`: `{kind, path}` when allowed, else -errno by area. */
  structural(
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
    const kind = this.kind(path);
    return kind === "rw" ? { kind, path } : -E.EROFS;
  }

  /**
   * The open backing fd of node `id` when it has no name left (unlinked, or replaced by a rename
   * while open): what its attributes and changes go through. The kernel sends no fh for fstat,
   * fchmod, futimens; any open handle on the node is the same file.
   */
  openFd(id: number, options: { fh?: number; plain?: boolean } = {}): number | null {
    const { fh, plain } = options;
    const byFh = fh === undefined ? undefined : this.handles.get(fh);
    if (byFh?.t === "fd" && (!plain || byFh.plain)) return byFh.fd;
    const n = this.nodes.get(id);
    if (n === undefined) return null;
    for (const h of this.handles.values()) {
      if (h.t === "fd" && h.node === n && (!plain || h.plain)) return h.fd;
    }
    return null;
  }

  /**
   * A backing fd `fd` of `node` was opened: the passthrough id its OPEN/CREATE reply carries (the
   * kernel then reads, writes and maps the backing file itself), or 0 (served here). Only where
   * `allow` says so (plain home/shared files: nothing there is validated per write), and only for
   * regular files without set-id bits: their writes by others stay WRITE requests, whose kill of
   * the bits (`files.ts` killPriv) is the daemon's own. (A file made set-id while open for
   * passthrough is covered too: the kernel then sends an empty SETATTR before the write, which
   * the daemon answers with the same kill.) While the node has open files, every new open takes
   * their mode and backing id (the kernel wants one io mode and one backing file per inode).
   * Pair with {@link closeIo}.
   */
  openIo(node: Node | undefined, fd: number, options: { allow: boolean }): number {
    if (node === undefined) return 0;
    const io = node.io;
    if (io !== undefined && io.opens > 0) {
      io.opens++;
      return io.backing;
    }
    let backing = 0;
    if (options.allow && this.passthroughFd >= 0) {
      const st = libc.fstat(fd);
      if (typeof st !== "number" && (st.mode & S.IFMT) === S.IFREG && (st.mode & 0o6000) === 0) {
        const id = libc.fuseBackingOpen(this.passthroughFd, fd);
        if (id > 0) backing = id;
        // not permitted (no CAP_SYS_ADMIN) or not supported: serve every file here from now on
        else if (id === -E.EPERM || id === -E.ENOTTY || id === -E.EINVAL) this.passthroughFd = -1;
      }
    }
    node.io = { backing, opens: 1 };
    return backing;
  }

  /** An fd handle of `node` was released: the last one drops the passthrough id. */
  closeIo(node: Node | undefined): void {
    const io = node?.io;
    if (io === undefined || --io.opens > 0) return;
    if (io.backing > 0 && this.passthroughFd >= 0) {
      libc.fuseBackingClose(this.passthroughFd, io.backing);
    }
    node!.io = undefined; // io !== undefined above
  }

  /** Registers a handle; returns its fh. */
  fh(h: Handle): number {
    const fh = this.#nextFh++;
    this.handles.set(fh, h);
    return fh;
  }
  /** A number that differs per call (temp inode numbers). */
  get serial(): number {
    return this.#nextFh;
  }

  /** Writes a `fuse_open_out` at `at` in `out` (`backing` > 0: passthrough); returns the end offset. */
  openOut(out: Uint8Array, at: number, fh: number, flags: number, backing = 0): number {
    const [v, o] = outView(out);
    v.setUint32(o + at, fh % 0x1_0000_0000, true);
    v.setUint32(o + at + 4, Math.floor(fh / 0x1_0000_0000), true);
    v.setUint32(o + at + 8, backing > 0 ? flags | FOPEN.PASSTHROUGH : flags, true);
    v.setInt32(o + at + 12, backing, true);
    return at + 16;
  }
}
