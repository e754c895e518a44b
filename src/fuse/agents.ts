/** Agent creation and removal through the mount: who may make or take apart `agent/<n>` and `agent/<n>.d` (spec/fuse.md). */
import { FATTR, RENAME } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import { isName } from "../abi/names.ts";
import * as libc from "../sys/libc.ts";
import type { At } from "../sys/dir.ts";
import { forgetCreator, installEntry, MAX_ENTRY_BYTES, noteCreator } from "./bridge.ts";
import { baseOf, type Kind, parentOf, stagedName } from "./classify.ts";
import type { Request } from "./conn.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;
/** Mode of a control directory in the backing tree (root's, like every definition). */
const CDIR_MODE = 0o755;

/** The rules of `agent/`, over the shared {@link Tree}. */
export class Agents {
  #t: Tree;

  constructor(tree: Tree) {
    this.#t = tree;
  }

  /** The agent `agent/<x>` or `agent/<x>.d` names, when `x` is a valid agent name. */
  of(parent: string, name: string, suffix: "" | ".d"): string | null {
    if (parent !== "agent" || (suffix && !name.endsWith(suffix))) return null;
    const n = suffix ? name.slice(0, -suffix.length) : name;
    return isName(n) ? n : null;
  }

  /** Root, or the uid that owns agent `n` (its `owner`, or its creator before `owner` exists). */
  mayChange(uid: number, n: string): boolean {
    return uid === 0 || uid === this.#t.o.owner(`agent/${n}.d/owner`);
  }

  /** MKDIR `agent/<n>.d`: anyone starts an agent of their own under a free name. */
  mkdir(req: Request, out: Uint8Array, n: string): number {
    const t = this.#t;
    const path = `agent/${n}.d`;
    if (typeof t.lstat(`agent/${n}`) !== "number") return -E.EEXIST;
    const p = t.at(path);
    if (typeof p === "number") return p;
    // Root's and 0755 whoever asks (the daemon's umask is 0, so the mode is set exactly): a
    // definition is edited only through the mount, where the creator is shown as its owner.
    const r = t.dir.mkdir(p, CDIR_MODE);
    if (r < 0) return r;
    noteCreator(t.o.root, n, req.uid);
    return t.entry(out, path);
  }

  /** CREATE `agent/.<n>.tmp-…` (a new entry, written in full before its rename): 0 when allowed. */
  mayStage(req: Request, name: string): number {
    const t = this.#t;
    const n = stagedName(name);
    if (n === null || !isName(n) || !this.mayChange(req.uid, n)) return -E.EACCES;
    if (typeof t.lstat(`agent/${n}.d`) === "number") return -E.ENOENT;
    return 0;
  }

  /**
   * SETATTR on `agent/<n>.d` while it is being made (createAgent's makeDir sets its mode): 0 when
   * allowed, -errno when refused, null when `path` is not such a directory. The backing directory
   * stays root's and 0755: only that mode, and owner root, are accepted (EPERM otherwise).
   */
  setattr(req: Request<"SETATTR">, path: string, kind: Kind): number | null {
    if (kind !== "cdir" || parentOf(path) !== "agent") return null;
    const n = this.of("agent", baseOf(path), ".d");
    if (n === null) return null;
    if (!this.mayChange(req.uid, n)) return -E.EACCES;
    if (!this.#t.o.creating(n)) return -E.EROFS;
    const a = req.arg, v = a.valid;
    if (v & FATTR.MODE && (a.mode & 0o7777) !== CDIR_MODE) return -E.EPERM;
    if ((v & FATTR.UID && a.uid !== 0) || (v & FATTR.GID && a.gid !== 0)) return -E.EPERM;
    return 0;
  }

  /**
   * UNLINK in `agent/` or an agent's `.d/`: an agent is removed entry first (its socket goes),
   * then its control directory; a half-made agent (no entry) can be taken apart by its creator.
   * Sessions under home/ stay. Null when `path` is none of these.
   */
  unlink(req: Request, parent: string): number | Promise<number> | null {
    const t = this.#t;
    const name = req.names[0];
    const path = parent === "" ? name : `${parent}/${name}`;
    const kind = t.kind(path);
    const entry = this.of(parent, name, "");
    const cdir = kind === "control" && parent.startsWith("agent/")
      ? this.of("agent", baseOf(parent), ".d")
      : null;
    if (!(kind === "stage" || (kind === "ro" && entry !== null) || cdir !== null)) return null;
    const n = kind === "stage" ? stagedName(name) : entry ?? cdir;
    if (n === null || !this.mayChange(req.uid, n)) return -E.EACCES;
    if (cdir !== null && !t.o.creating(cdir)) return -E.EROFS;
    const p = t.at(path);
    if (typeof p === "number") return p;
    // Taking an agent apart: it stays its owner's until its .d/ is gone, even once `owner` is.
    const owner = kind === "ro" ? t.o.owner(`agent/${n}.d/owner`) : -1;
    const r = t.dir.unlink(p);
    if (r < 0) return r;
    t.nodes.drop(path);
    if (kind !== "ro") return 0;
    noteCreator(t.o.root, n, owner);
    return this.#after(t.o.onAgentGone, n);
  }

  /** RMDIR `agent/<n>.d` (`n` from {@link of}): only once `agent/<n>` is gone, and no temps are left. */
  rmdir(req: Request, n: string): number {
    const t = this.#t;
    if (!this.mayChange(req.uid, n)) return -E.EACCES;
    if (!t.o.creating(n)) return -E.EROFS; // remove agent/<n> first
    const path = `agent/${n}.d`;
    for (const p of t.temps.keys()) if (parentOf(p) === path) return -E.ENOTEMPTY;
    const p = t.at(path);
    if (typeof p === "number") return p;
    const r = t.dir.rmdir(p);
    if (r === 0) {
      t.nodes.drop(path);
      t.back.forget(path);
      forgetCreator(t.o.root, n);
    }
    return r;
  }

  /**
   * RENAME `agent/.<n>.tmp-…` to `agent/<n>`: the last step of a creation (or a new program for an
   * agent); the reply waits for the `onAgent` hook.
   */
  rename(req: Request, flags: number): number | Promise<number> {
    const t = this.#t;
    const [fromName, toName] = req.names;
    const n = stagedName(fromName);
    if (n === null || n !== toName || !isName(n)) return -E.EACCES;
    if (flags & RENAME.EXCHANGE) return -E.EINVAL;
    if (!this.mayChange(req.uid, n)) return -E.EACCES;
    // an entry needs its control directory first
    if (typeof t.lstat(`agent/${n}.d`) === "number") return -E.ENOENT;
    const from = `agent/${fromName}`, to = `agent/${toName}`;
    const f = t.at(from);
    if (typeof f === "number") return f;
    if (flags & RENAME.NOREPLACE && typeof t.lstat(to) !== "number") return -E.EEXIST;
    // The staged file is the stager's (written through the mount); the entry is root's. So the
    // entry is a fresh root-owned copy of the staged bytes, installed atomically, and the staged
    // file goes: nothing the stager could still hold open or chmod is ever the definition.
    const bytes = this.#staged(f);
    if (typeof bytes === "number") return bytes;
    const r = installEntry(t.o.root, n, bytes.data, { exec: bytes.exec });
    if (r < 0) return r;
    t.dir.unlink(f);
    t.nodes.move(from, to);
    forgetCreator(t.o.root, n); // from now on `owner` alone says whose agent it is
    return this.#after(t.o.onAgent, n);
  }

  /** The bytes of a staged entry (a regular file, never through a symlink) and whether it is executable. */
  #staged(at: At): { data: Uint8Array; exec: boolean } | number {
    const fd = this.#t.dir.open(at, libc.O.RDONLY | libc.O.NONBLOCK);
    if (fd < 0) return fd;
    try {
      const st = libc.fstat(fd);
      if (typeof st === "number") return st;
      if ((st.mode & 0o170000) !== 0o100000) return -E.EINVAL;
      if (st.size > MAX_ENTRY_BYTES) return -E.EFBIG;
      const data = new Uint8Array(st.size);
      for (let off = 0; off < data.length;) {
        const n = libc.pread(fd, data.subarray(off), off);
        if (n < 0) return n;
        if (n === 0) return -E.EIO; // shrank while read: the stager is still writing
        off += n;
      }
      return { data, exec: (st.mode & 0o111) !== 0 };
    } finally {
      libc.close(fd);
    }
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
}
