/** Agent creation and removal through the mount: who may make or take apart `agent/<n>` and `agent/<n>.d` (spec/fuse.md). */
import { RENAME } from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import { isName } from "../abi/names.ts";
import { baseOf, type Kind, parentOf, stagedName } from "./classify.ts";
import type { Request } from "./conn.ts";
import type { Tree } from "./tree.ts";

const E = ERRNO;

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

  /** Root, or the uid that owns agent `n` (its `owner`, or its `.d/` before `owner` exists). */
  mayChange(uid: number, n: string): boolean {
    return uid === 0 || uid === this.#t.o.owner(`agent/${n}.d/owner`);
  }

  /** MKDIR `agent/<n>.d`: anyone starts an agent of their own under a free name. */
  mkdir(req: Request, out: Uint8Array, n: string): number {
    const t = this.#t;
    const path = `agent/${n}.d`;
    if (typeof t.dir.lstat(t.backing(`agent/${n}`)) !== "number") return -E.EEXIST;
    const p = t.backing(path);
    const r = t.dir.mkdir(p, req.arg.mode & 0o7777);
    if (r < 0) return r;
    t.dir.lchown(p, req.uid, req.gid);
    return t.entry(out, path);
  }

  /** CREATE `agent/.<n>.tmp-…` (a new entry, written in full before its rename): 0 when allowed. */
  mayStage(req: Request, name: string): number {
    const t = this.#t;
    const n = stagedName(name);
    if (n === null || !isName(n) || !this.mayChange(req.uid, n)) return -E.EACCES;
    if (typeof t.dir.lstat(t.backing(`agent/${n}.d`)) === "number") return -E.ENOENT;
    return 0;
  }

  /**
   * SETATTR on `agent/<n>.d` while it is being made (createAgent sets its mode and owner): 0 when
   * allowed, -errno when refused, null when `path` is not such a directory.
   */
  setattr(req: Request, path: string, kind: Kind): number | null {
    if (kind !== "cdir" || parentOf(path) !== "agent") return null;
    const n = this.of("agent", baseOf(path), ".d");
    if (n === null) return null;
    if (!this.mayChange(req.uid, n)) return -E.EACCES;
    if (!this.#t.o.creating(n)) return -E.EROFS;
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
    const r = t.dir.unlink(t.backing(path));
    if (r < 0) return r;
    t.nodes.drop(path);
    return kind === "ro" ? this.#after(t.o.onAgentGone, n) : 0;
  }

  /** RMDIR `agent/<n>.d` (`n` from {@link of}): only once `agent/<n>` is gone, and no temps are left. */
  rmdir(req: Request, n: string): number {
    const t = this.#t;
    if (!this.mayChange(req.uid, n)) return -E.EACCES;
    if (!t.o.creating(n)) return -E.EROFS; // remove agent/<n> first
    const path = `agent/${n}.d`;
    for (const p of t.temps.keys()) if (parentOf(p) === path) return -E.ENOTEMPTY;
    const r = t.dir.rmdir(t.backing(path));
    if (r === 0) t.nodes.drop(path);
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
    if (typeof t.dir.lstat(t.backing(`agent/${n}.d`)) === "number") return -E.ENOENT;
    const from = `agent/${fromName}`, to = `agent/${toName}`;
    const r = t.dir.rename(t.backing(from), t.backing(to), flags);
    if (r < 0) return r;
    t.nodes.move(from, to);
    return this.#after(t.o.onAgent, n);
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
