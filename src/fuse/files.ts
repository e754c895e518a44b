/** File handles: OPEN/CREATE/READ/WRITE/FLUSH/FSYNC/RELEASE and SETATTR, for backing files, controls, temps and virtual files. */
import {
  type ArgOf,
  encode,
  FATTR,
  FOPEN,
  LSEEK_OUT,
  OPEN_KILL_SUIDGID,
  WRITE_KILL_SUIDGID,
  WRITE_OUT,
} from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { type At, UTIME } from "../sys/dir.ts";
import { fromStat, outView, putAttr, putEntry, S, virtualAttr, virtualIno } from "./attr.ts";
import { isTempName, parentOf } from "./classify.ts";
import { ControlWriter, newTemp, put, resize } from "./control.ts";
import type { Request } from "./conn.ts";
import type { Agents } from "./agents.ts";
import { asCaller } from "./caller.ts";
import { join } from "./nodes.ts";
import type { Handle, Tree } from "./tree.ts";

const E = ERRNO;
const enc = new TextEncoder();
const MAX_TEMPS = 64;
/** ESTALE (not in the ABI's errno table): the name no longer is what the kernel looked up. */
const ESTALE = 116;
/** open(2) flags passed on to a backing file: access mode, O_APPEND, O_TRUNC, O_SYNC. */
const KEEP = libc.O.ACCMODE | libc.O.APPEND | libc.O.TRUNC | 0o4010000;
/** `fuse_open_out.open_flags`: FOPEN_DIRECT_IO, for everything whose bytes are not a plain file's. */
const DIRECT = FOPEN.DIRECT_IO;
/**
 * FOPEN_NOFLUSH: close(2) sends no FLUSH. Every handle but a control being written has nothing to
 * do at FLUSH (writes reach the backing file or the temp at once; no writeback cache), so only
 * those keep it: their commit and its errno come at close (spec/fuse.md "Control writes").
 */
const NOFLUSH = FOPEN.NOFLUSH;
/** SETATTR bits that change a file's size or times. */
const CHANGES = FATTR.SIZE | FATTR.ATIME | FATTR.MTIME | FATTR.ATIME_NOW | FATTR.MTIME_NOW;

const SECURITY_CAPABILITY = libc.cstr("security.capability");
const S_ISUID = 0o4000;
const S_IXGRP = 0o010;

/**
 * What the VFS does on a write or truncate by a caller without CAP_FSETID, done by the daemon on
 * the open backing file (HANDLE_KILLPRIV_V2: the kernel flags such requests, spec/fuse.md
 * "Ownership and modes"): clears setuid, setgid when the file is group-executable (setgid without
 * it marks mandatory locking and stays), and file capabilities. Only on the fd the request's
 * write or truncate goes through, never by name. 0 or -errno.
 */
function killPriv(fd: number): number {
  const st = libc.fstat(fd);
  if (typeof st === "number") return st;
  if ((st.mode & S.IFMT) !== S.IFREG) return 0;
  const old = st.mode & 0o7777;
  let mode = old & ~S_ISUID;
  if ((mode & (S.ISGID | S_IXGRP)) === (S.ISGID | S_IXGRP)) mode &= ~S.ISGID;
  const x = libc.fremovexattr(fd, SECURITY_CAPABILITY);
  if (x < 0 && x !== -E.ENODATA && x !== -E.ENOTSUP) return x;
  return mode === old ? 0 : libc.fchmod(fd, mode);
}

/** The `[sec, nsec]` pairs of a SETATTR's atime and mtime (UTIME_NOW / UTIME_OMIT by its valid bits). */
function times(a: ArgOf<"SETATTR">): [[number, number], [number, number]] {
  const v = a.valid;
  const ts = (set: number, now: number, s: number, ns: number): [number, number] =>
    v & now ? [0, UTIME.NOW] : v & set ? [s, ns] : [0, UTIME.OMIT];
  return [
    ts(FATTR.ATIME, FATTR.ATIME_NOW, a.atime, a.atimensec),
    ts(FATTR.MTIME, FATTR.MTIME_NOW, a.mtime, a.mtimensec),
  ];
}

/** The file operations, over the shared {@link Tree}. */
export class Files {
  #t: Tree;
  #agents: Agents;

  constructor(tree: Tree, agents: Agents) {
    this.#t = tree;
    this.#agents = agents;
  }

  /** A writer for control `path`: the rules of who may write which control, or -errno. */
  #writer(
    path: string,
    req: Request,
    options: { truncate: boolean; append?: boolean },
  ): ControlWriter | number {
    const o = this.#t.o, why = this.#t.why;
    const uid = req.uid;
    const ck = o.controlKind(path);
    if (ck === "readonly") return -E.EROFS;
    if (ck === "unknown") return -E.EINVAL;
    if (uid !== 0 && uid !== o.owner(path)) return -E.EACCES;
    let initial = new Uint8Array(0);
    if (!options.truncate) {
      const r = this.#readAll(path);
      if (typeof r !== "number") initial = r;
      else if (r !== -E.ENOENT) return r;
    }
    return new ControlWriter(path, {
      uid,
      gid: req.gid,
      initial,
      truncated: options.truncate,
      append: options.append,
      commit: o.commit,
      check: o.check,
      refused: (p, u, err) => {
        why.refused(p, u, err);
        o.refused?.(p, u, err);
      },
      accepted: (p, u) => why.accepted(p, u),
    });
  }

  /** OPEN. */
  open(req: Request<"OPEN">, out: Uint8Array): number {
    const t = this.#t;
    const path = t.path(req.nodeid);
    if (path === null) return -E.ENOENT;
    const flags = req.arg.flags;
    const writing = (flags & libc.O.ACCMODE) !== libc.O.RDONLY;
    const kind = t.kind(path);
    switch (kind) {
      case "rw":
      case "stage":
      case "ro": {
        if (kind === "ro" && (writing || flags & libc.O.TRUNC)) return -E.EROFS;
        const text = kind === "ro" ? t.virtualText(kind, path) : null;
        if (text !== null) {
          return t.openOut(out, 0, t.fh({ t: "bytes", data: enc.encode(text) }), DIRECT);
        }
        // The kernel checked the caller against the attributes it holds for this node; the name
        // may since lead to another file (renamed in the backing tree behind the mount). So the
        // opened inode must be the node's (else ESTALE: the kernel looks the name up afresh and
        // checks again), and a home/shared file is opened as the caller, whose own permission
        // check then holds whatever the name leads to.
        const node = t.nodes.get(req.nodeid);
        const fd = kind === "rw"
          ? asCaller(req, () => this.#openFile(path, flags & KEEP, node?.ino ?? -1))
          : this.#openFile(path, flags & KEEP, node?.ino ?? -1);
        if (fd < 0) return fd;
        if (flags & libc.O.TRUNC && req.arg.open_flags & OPEN_KILL_SUIDGID) {
          const k = killPriv(fd);
          if (k < 0) {
            libc.close(fd);
            return k;
          }
        }
        if (node && (writing || flags & libc.O.TRUNC)) node.until = 0;
        const backing = t.openIo(node, fd, { allow: kind === "rw" });
        return t.openOut(
          out,
          0,
          t.fh({ t: "fd", fd, node, plain: kind === "rw" }),
          NOFLUSH,
          backing,
        );
      }
      case "status":
      case "launcher": {
        if (writing || flags & libc.O.TRUNC) return -E.EROFS;
        const data = enc.encode(t.virtualText(kind, path) ?? "");
        return t.openOut(out, 0, t.fh({ t: "bytes", data }), DIRECT | NOFLUSH);
      }
      case "control": {
        // Not left to default_permissions alone: a secret control (`env`) and a temp (a draft
        // that may hold one) are refused here to anyone but their owner and root.
        const temp = t.temps.get(path);
        if (temp) {
          if (req.uid !== 0 && req.uid !== temp.uid) return -E.EACCES;
          if (writing && flags & libc.O.TRUNC) temp.len = 0;
          return t.openOut(out, 0, t.fh({ t: "temp", temp }), DIRECT | NOFLUSH);
        }
        const text = t.virtualText(kind, path);
        if (text !== null) {
          // computed (a model's `limit`): read-only for everyone, root included
          if (writing || flags & libc.O.TRUNC) return -E.EROFS;
          return t.openOut(out, 0, t.fh({ t: "bytes", data: enc.encode(text) }), DIRECT);
        }
        if (!t.mayRead(path, req.uid)) return -E.EACCES;
        if (!writing && !(flags & libc.O.TRUNC)) {
          const fd = this.#openFile(path, libc.O.RDONLY, t.nodes.get(req.nodeid)?.ino ?? -1);
          if (fd < 0) return fd;
          return t.openOut(out, 0, t.fh({ t: "control", fd, writer: null }), DIRECT | NOFLUSH);
        }
        const w = this.#writer(path, req, {
          truncate: !!(flags & libc.O.TRUNC),
          append: !!(flags & libc.O.APPEND),
        });
        if (typeof w === "number") return w;
        return t.openOut(out, 0, t.fh({ t: "control", fd: -1, writer: w }), DIRECT);
      }
      default:
        return writing ? -E.EROFS : -E.EISDIR;
    }
  }

  /** CREATE: new files in home/shared; known controls and temps in control dirs; staged agent entries. */
  create(req: Request<"CREATE">, out: Uint8Array): number {
    const t = this.#t;
    const parent = t.path(req.nodeid);
    if (parent === null) return -E.ENOENT;
    const name = req.names[0];
    const path = join(parent, name);
    const kind = t.kind(path);
    const flags = req.arg.flags;
    if (kind === "control") return this.#createControl(req, out, path);
    if (kind === "stage") {
      const r = this.#agents.mayStage(req, name);
      if (r < 0) return r;
    } else {
      const s = t.structural(parent, name, { uid: req.uid });
      if (typeof s === "number") return s;
    }
    const p = t.at(path);
    if (typeof p === "number") return p;
    const mode = req.arg.mode & 0o7777;
    const make = () => t.dir.open(p, (flags & KEEP) | libc.O.CREAT | libc.O.EXCL, mode);
    let fd: number;
    if (kind === "stage") {
      // agent/ is root's in the backing tree: the staged entry is given to its creator by fd
      fd = make();
      if (fd >= 0) libc.fchown(fd, req.uid, req.gid);
    } else {
      fd = asCaller(req, make); // born the caller's (a setgid directory gives its group)
    }
    if (fd === -E.EEXIST && !(flags & libc.O.EXCL)) {
      // appeared meanwhile (maybe renamed there behind the mount): open it as the caller, as OPEN
      const open = () => this.#openFile(path, flags & KEEP);
      fd = kind === "stage" ? open() : asCaller(req, open);
      if (fd >= 0 && flags & libc.O.TRUNC && req.arg.open_flags & OPEN_KILL_SUIDGID) {
        const k = killPriv(fd);
        if (k < 0) {
          libc.close(fd);
          return k;
        }
      }
    }
    if (fd < 0) return fd;
    const n = t.entry(out, path);
    if (n < 0) {
      libc.close(fd);
      return n;
    }
    const node = t.nodes.at(path);
    if (node) node.until = 0; // opened for writing: its attributes are about to change
    const backing = t.openIo(node, fd, { allow: kind === "rw" });
    return t.openOut(out, n, t.fh({ t: "fd", fd, node, plain: kind === "rw" }), NOFLUSH, backing);
  }

  /**
   * TMPFILE (open(2) with O_TMPFILE) in a home/shared directory: an unnamed backing file made as
   * the caller (born theirs), served through a node without a name until LINK gives it one. A
   * control directory answers EOPNOTSUPP (callers fall back to a named temp, kept in memory).
   */
  tmpfile(req: Request<"TMPFILE">, out: Uint8Array): number {
    const t = this.#t;
    const dir = t.path(req.nodeid);
    if (dir === null) return -E.ENOENT;
    const kind = t.kind(dir);
    if (kind === "cdir") return -E.ENOTSUP;
    if (kind !== "rw") return dir === "" ? -E.EACCES : -E.EROFS;
    const p = t.at(dir);
    if (typeof p === "number") return p;
    // O_EXCL kept: such a file can never be linked (open(2))
    const flags = (req.arg.flags & (KEEP | libc.O.EXCL) & ~libc.O.TRUNC) | libc.O.TMPFILE;
    const fd = asCaller(req, () => t.dir.open(p, flags, req.arg.mode & 0o7777));
    if (fd < 0) return fd;
    const st = libc.fstat(fd);
    if (typeof st === "number") {
      libc.close(fd);
      return st;
    }
    const node = t.nodes.anon();
    t.openIo(node, fd, { allow: false }); // its later opens by name share its mode
    const n = putEntry(out, { nodeid: node.id, attr: fromStat(st), ttl: 0 });
    return t.openOut(out, n, t.fh({ t: "fd", fd, node, plain: true }), NOFLUSH);
  }

  /** FALLOCATE on a backing file (allocate, keep size, punch a hole, zero a range): what the backing file system answers. */
  fallocate(req: Request<"FALLOCATE">): number {
    const h = this.#t.handles.get(req.arg.fh);
    if (!h) return -E.EBADF;
    // not ENOSYS: that would turn fallocate off for the whole mount
    if (h.t !== "fd") return -E.ENOTSUP;
    const { mode, offset, length } = req.arg;
    return libc.fallocate(h.fd, mode, offset, length);
  }

  /** LSEEK (SEEK_DATA / SEEK_HOLE only): the backing file's answer; in-memory content has no holes. */
  lseek(req: Request<"LSEEK">, out: Uint8Array): number {
    const h = this.#t.handles.get(req.arg.fh);
    if (!h) return -E.EBADF;
    const { offset, whence } = req.arg;
    let r: number;
    const fd = h.t === "fd" || (h.t === "control" && !h.writer) ? h.fd : -1;
    if (fd >= 0) r = libc.lseek(fd, offset, whence);
    else {
      const size = h.t === "temp"
        ? h.temp.len
        : h.t === "bytes"
        ? h.data.length
        : h.t === "control" && h.writer
        ? h.writer.len
        : 0;
      if (offset >= size) r = -E.ENXIO;
      else r = whence === libc.SEEK.DATA ? offset : whence === libc.SEEK.HOLE ? size : -E.EINVAL;
    }
    if (r < 0) return r;
    const [v, o] = outView(out);
    return encode(LSEEK_OUT, v, o, { offset: r }) - o;
  }

  /** CREATE in a control directory: an in-memory temp (editors, `sed -i`), or a known control. */
  #createControl(req: Request<"CREATE">, out: Uint8Array, path: string): number {
    const t = this.#t;
    if (isTempName(req.names[0])) {
      if (req.uid !== 0 && req.uid !== t.o.owner(path)) return -E.EACCES;
      const parent = parentOf(path);
      let inDir = 0;
      for (const p of t.temps.keys()) if (parentOf(p) === parent) inDir++;
      if (inDir >= MAX_TEMPS) return -E.ENOSPC;
      const temp = newTemp({
        mode: req.arg.mode & 0o7777,
        uid: req.uid,
        gid: req.gid,
        ino: virtualIno(path) + t.serial,
      });
      t.temps.set(path, temp);
      const n = t.entry(out, path);
      if (n < 0) return n;
      return t.openOut(out, n, t.fh({ t: "temp", temp }), DIRECT | NOFLUSH);
    }
    const w = this.#writer(path, req, {
      truncate: true,
      append: !!(req.arg.flags & libc.O.APPEND),
    });
    if (typeof w === "number") return w;
    const node = t.nodes.ref(path);
    const mode = S.IFREG | t.controlMode(path);
    const attr = virtualAttr(path, { mode, size: 0, uid: req.uid, time: t.start });
    const n = putEntry(out, { nodeid: node.id, attr, ttl: 0 });
    return t.openOut(out, n, t.fh({ t: "control", fd: -1, writer: w }), DIRECT);
  }

  /** READ. */
  read(req: Request<"READ">, out: Uint8Array): number {
    const h = this.#t.handles.get(req.arg.fh);
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
  write(req: Request<"WRITE">, out: Uint8Array): number {
    const h = this.#t.handles.get(req.arg.fh);
    if (!h) return -E.EBADF;
    let n: number;
    switch (h.t) {
      case "fd":
        // a writer without CAP_FSETID: set-id bits go first, as file_remove_privs() does
        if (req.arg.write_flags & WRITE_KILL_SUIDGID) {
          const k = killPriv(h.fd);
          if (k < 0) return k;
        }
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

  /** FLUSH (every close): a control handle commits here, and its errno reaches close(2). */
  flush(req: Request<"FLUSH">): number {
    const h = this.#t.handles.get(req.arg.fh);
    return h?.t === "control" && h.writer ? h.writer.flush(req.arg.lock_owner) : 0;
  }

  /** FSYNC. */
  fsync(req: Request<"FSYNC">): number {
    const h = this.#t.handles.get(req.arg.fh);
    if (h?.t === "fd") return libc.fsync(h.fd, { data: !!(req.arg.fsync_flags & 1) });
    if (h?.t === "control" && h.writer) return h.writer.flush(null);
    return 0;
  }

  /** RELEASE. */
  release(req: Request<"RELEASE">): number {
    const handles = this.#t.handles;
    const h = handles.get(req.arg.fh);
    handles.delete(req.arg.fh);
    if (h?.t === "fd") {
      libc.close(h.fd);
      this.#t.closeIo(h.node);
    }
    if (h?.t === "control") {
      if (h.fd >= 0) libc.close(h.fd);
      h.writer?.release(); // nobody is left to hear an error: FLUSH already reported it
    }
    return 0;
  }

  /** SETATTR: chmod, chown, truncate, utimens. */
  setattr(req: Request<"SETATTR">, out: Uint8Array): number {
    const t = this.#t;
    const a = req.arg;
    const v = a.valid;
    const path = t.path(req.nodeid);
    const h = v & FATTR.FH ? t.handles.get(a.fh) : undefined;
    if (path === null) {
      // an unlinked file still open: through its open file, as the caller
      const fd = t.openFd(req.nodeid, { fh: v & FATTR.FH ? a.fh : undefined });
      if (fd === null) return -E.ENOENT;
      const r = asCaller(req, () => this.#fsetattr(fd, a));
      if (r < 0) return r;
      if ((v & FATTR.SIZE && v & FATTR.KILL_SUIDGID) || v === 0) {
        const k = killPriv(fd);
        if (k < 0) return k;
      }
      const st = libc.fstat(fd);
      return typeof st === "number" ? st : putAttr(out, { attr: fromStat(st), ttl: 0 });
    }
    const kind = t.kind(path);
    if (v === 0 && kind === "rw") return this.#killPrivRequest(req, out, path);
    const temp = t.temps.get(path);
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
      return t.attrReply(out, path);
    }
    if (kind === "control") {
      if (v & (FATTR.MODE | FATTR.UID | FATTR.GID)) return -E.EROFS;
      // a computed control (a model's `limit`) has no file whose size or times could change
      if (t.virtualText(kind, path) !== null && v & CHANGES) return -E.EROFS;
      if (v & FATTR.SIZE) {
        if (h?.t === "control" && h.writer) {
          const r = h.writer.truncate(a.size);
          if (r < 0) return r;
        } else {
          const w = this.#writer(path, req, { truncate: false });
          if (typeof w === "number") return w;
          const r = w.truncate(a.size);
          if (r < 0) return r;
          const f = w.flush(null);
          if (f < 0) return f;
        }
      }
      return t.attrReply(out, path, h);
    }
    // A creator sets the mode and owner of its new control directory (makeDir in createAgent).
    const making = this.#agents.setattr(req, path, kind);
    if (making !== null) {
      if (making < 0) return making;
      if (v & FATTR.SIZE) return -E.EISDIR;
    } else if (kind !== "rw" && kind !== "stage") return -E.EROFS;
    const p = t.at(path);
    if (typeof p === "number") return p;
    // In home/shared as the caller: the kernel checked ownership and modes on the node it knows;
    // the backing call re-checks them on whatever the name is now. Under agent/ (a control dir
    // being made, a staged entry) the backing tree is root's and the rules above decided.
    // A truncate by name opens the file (as the caller): that fd is where a kill of set-id bits
    // goes afterwards, as the daemon (a chown clears them in the backing kernel itself).
    const opened = { fd: -1 };
    try {
      const r = kind === "rw" && making === null
        ? asCaller(req, () => this.#setattr(p, a, h, opened))
        : this.#setattr(p, a, h, opened);
      if (r < 0) return r;
      if (v & FATTR.SIZE && v & FATTR.KILL_SUIDGID) {
        const fd = h?.t === "fd" ? h.fd : opened.fd;
        const k = fd >= 0 ? killPriv(fd) : 0;
        if (k < 0) return k;
      }
    } finally {
      if (opened.fd >= 0) libc.close(opened.fd);
    }
    return t.attrReply(out, path);
  }

  /**
   * A SETATTR with nothing to set: the kernel's kill of set-id bits and file capabilities before
   * a write by a caller without CAP_FSETID that does not reach the daemon (a passthrough file
   * made set-id while open: file_remove_privs() is all the kernel does, and with
   * HANDLE_KILLPRIV_V2 it leaves the clearing to the server). Done as a WRITE's kill is: on an fd
   * of the file (one of its open handles, else opened by name, never following), by the daemon.
   */
  #killPrivRequest(req: Request<"SETATTR">, out: Uint8Array, path: string): number {
    const t = this.#t;
    const open = t.openFd(req.nodeid);
    const fd = open ?? this.#openFile(path, libc.O.RDONLY);
    if (fd < 0) return fd;
    const k = killPriv(fd);
    if (open === null) libc.close(fd);
    return k < 0 ? k : t.attrReply(out, path);
  }

  /** SETATTR on an open file that has no name left: fchmod, fchown, ftruncate, futimens; 0 or -errno. */
  #fsetattr(fd: number, a: ArgOf<"SETATTR">): number {
    const v = a.valid;
    if (v & FATTR.MODE) {
      const r = libc.fchmod(fd, a.mode & 0o7777);
      if (r < 0) return r;
    }
    if (v & (FATTR.UID | FATTR.GID)) {
      const r = libc.fchown(fd, v & FATTR.UID ? a.uid : -1, v & FATTR.GID ? a.gid : -1);
      if (r < 0) return r;
    }
    if (v & FATTR.SIZE) {
      const r = libc.ftruncate(fd, a.size);
      if (r < 0) return r;
    }
    if (v & (FATTR.ATIME | FATTR.MTIME | FATTR.ATIME_NOW | FATTR.MTIME_NOW)) {
      const [at, mt] = times(a);
      const r = libc.futimens(fd, at, mt);
      if (r < 0) return r;
    }
    return 0;
  }

  /** The backing half of SETATTR on a name (chmod, chown, truncate, utimens): 0 or -errno. */
  #setattr(p: At, a: ArgOf<"SETATTR">, h: Handle | undefined, opened: { fd: number }): number {
    const t = this.#t;
    const v = a.valid;
    if (v & FATTR.MODE) {
      const r = t.dir.chmod(p, a.mode & 0o7777);
      if (r < 0) return r;
    }
    if (v & (FATTR.UID | FATTR.GID)) {
      const ids = { uid: v & FATTR.UID ? a.uid : -1, gid: v & FATTR.GID ? a.gid : -1 };
      const r = t.dir.lchown(p, ids);
      if (r < 0) return r;
    }
    if (v & FATTR.SIZE) {
      let fd = h?.t === "fd" ? h.fd : -1;
      if (fd < 0) {
        // no truncateat(2): opened O_NOFOLLOW | O_NONBLOCK, kept for the caller (see setattr)
        fd = opened.fd = t.dir.open(p, libc.O.WRONLY | libc.O.NONBLOCK);
        if (fd < 0) return fd;
      }
      const r = libc.ftruncate(fd, a.size);
      if (r < 0) return r;
    }
    if (v & (FATTR.ATIME | FATTR.MTIME | FATTR.ATIME_NOW | FATTR.MTIME_NOW)) {
      const [atime, mtime] = times(a);
      const r = t.dir.utimens(p, { atime, mtime });
      if (r < 0) return r;
    }
    return 0;
  }

  /**
   * Opens an existing backing file: never through a symlink, never blocking (a FIFO swapped in
   * behind the mount would hang the daemon), and only a regular file (anything else: ESTALE, the
   * kernel looks the name up again). `ino`: the inode it must be (another: ESTALE too).
   */
  #openFile(path: string, flags: number, ino?: number): number {
    const t = this.#t;
    const p = t.at(path);
    if (typeof p === "number") return p;
    const fd = t.dir.open(p, flags | libc.O.NONBLOCK);
    if (fd < 0) return fd;
    const st = libc.fstat(fd);
    if (
      typeof st === "number" || (st.mode & S.IFMT) !== S.IFREG ||
      (ino !== undefined && st.ino !== ino)
    ) {
      libc.close(fd);
      return typeof st === "number" ? st : -ESTALE;
    }
    // O_NONBLOCK was only for the open: reads and writes of a regular file ignore it anyway
    return fd;
  }

  /** The bytes of a backing control (at most 64 KiB + 1: more is refused by validation anyway), or -errno. */
  #readAll(path: string): Uint8Array<ArrayBuffer> | number {
    const fd = this.#openFile(path, libc.O.RDONLY);
    if (fd < 0) return fd;
    const buf = new Uint8Array(64 * 1024 + 1);
    let len = 0;
    try {
      while (len < buf.length) {
        const n = libc.pread(fd, buf.subarray(len), len);
        if (n < 0) return n;
        if (n === 0) break;
        len += n;
      }
    } finally {
      libc.close(fd);
    }
    return buf.slice(0, len);
  }
}
