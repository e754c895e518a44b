/** What a sandbox must never see or write: CortexFS's private state (storage, run dir) and durable session history. */
import { CtxError } from "../abi/errno.ts";
import { Dir } from "../sys/dir.ts";
import { close } from "../sys/libc.ts";

/** The host paths the guard knows, all absolute and canonical. */
export interface Private {
  /** Never visible inside a sandbox in any mode: the storage root, the run dir (agent sockets). */
  hidden: string[];
  /** Host paths of the tree (its backing generation and, in production, the mount projecting it). */
  tree: string[];
}

/** One bind the view is about to make: canonical host source, sandbox target, mode. */
export interface Source {
  src: string;
  dst: string;
  mode: "ro" | "rw";
  /**
   * The client's own cwd, not a path the tree's controls name: for it the backing tree is
   * storage like the rest (private state); only the mount projects the tree.
   */
  cwd?: boolean;
}

const under = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : dir + "/");

/** The first path component of `inner` below `outer` (which contains it). */
function first(inner: string, outer: string): string {
  return inner.slice(outer === "/" ? 1 : outer.length + 1).split("/")[0];
}

const join = (dst: string, name: string) => dst === "/" ? `/${name}` : `${dst}/${name}`;

const DT_DIR = 4;

/**
 * Directory names in the tree directory `rel` of `backing`, reached without following any
 * symlink (openat2 RESOLVE_NO_SYMLINKS|BENEATH): a user who swaps `home/<u>/agent` for a link to
 * a root-only directory gets no listing of it as mask names. A listing failure: none.
 */
function dirs(backing: string, rel: string[]): string[] {
  let dir: Dir | undefined;
  let fd = -1;
  try {
    dir = new Dir(backing);
    fd = dir.beneath(enc.encode(rel.join("/") + "\0"));
    if (fd < 0) return [];
    const out: string[] = [];
    const r = dir.scan({ fd, name: enc.encode(".\0") }, (buf, start, end, type) => {
      if (type === DT_DIR) out.push(dec.decode(buf.subarray(start, end)));
    });
    return r < 0 ? [] : out;
  } catch {
    // Dir throws one plain Error for any failed open(2), and a listing failure is none (above).
    return [];
  } finally {
    if (fd >= 0) close(fd);
    dir?.close();
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Where session history lies below the tree directory `rel` (a tree-relative path): the names of
 * `rel`'s children that lead to a session root (`home/<u>/agent/<a>/session`,
 * `shared/agents/agent/<a>/session`), or "inside" when `rel` is within one.
 */
function sessionsBelow(rel: string[], backing: string): string[] | "inside" {
  if (rel.length === 0) return ["home", "shared"]; // the tree's root: both lead to sessions
  const top = rel[0];
  const pattern = top === "home"
    ? ["home", "*", "agent", "*", "session"]
    : top === "shared"
    ? ["shared", "agents", "agent", "*", "session"]
    : null;
  if (!pattern) return [];
  const n = rel.length;
  for (let i = 1; i < Math.min(n, pattern.length); i++) {
    if (pattern[i] !== "*" && pattern[i] !== rel[i]) return []; // not on a path to history
  }
  if (n >= pattern.length) return "inside";
  const next = pattern[n];
  return next === "*" ? dirs(backing, rel) : [next];
}

/**
 * Whether `src` lies in the tree's data (`home/<...>/`, `shared/<...>/`): true; elsewhere in the
 * tree (its root, `agent/`, `tool/`, `model/`, `home` itself): false, the control plane, which a
 * sandbox may see but never write (a writable view of `agent/<n>.d/` would let the agent rewrite
 * its own authority; the mount admits the agent's uid as any other caller); outside: null.
 */
export function treeData(src: string, tree: readonly string[]): boolean | null {
  const alias = tree.find((t) => under(src, t));
  if (alias === undefined) return null;
  const rel = src === alias ? [] : src.slice(alias.length + 1).split("/");
  return (rel[0] === "home" || rel[0] === "shared") && rel.length >= 2;
}

/**
 * Checks the binds of a view against private state and returns the sandbox paths to cover with
 * an empty read-only tmpfs. A source inside hidden state is EACCES in any mode; a writable source
 * inside session history is EACCES (durable history is host-owned; read-only it may be seen).
 * A source that contains hidden state, or (when writable) session history, keeps it out of view
 * by masking the child of the bind root that leads there: that child is then a mount point in
 * the sandbox, so no process inside can rename it, or anything below it, out from under the mask.
 */
export function guardView(binds: readonly Source[], p: Private): string[] {
  const masks = new Set<string>();
  const [backing] = p.tree;
  for (const b of binds) {
    const what = `"${b.dst}" (from "${b.src}")`;
    const alias = p.tree.find((t) => under(b.src, t) && !(b.cwd && t === backing));
    if (alias !== undefined) {
      const rel = b.src === alias ? [] : b.src.slice(alias.length + 1).split("/");
      const below = sessionsBelow(rel, backing);
      if (below === "inside") {
        if (b.mode === "rw") {
          throw new CtxError(
            "EACCES",
            `${what} lies in session history, which only the host writes: it cannot be bound read-write`,
          );
        }
        continue;
      }
      if (b.mode === "rw") { for (const name of below) masks.add(join(b.dst, name)); }
      continue;
    }
    for (const h of p.hidden) {
      if (under(b.src, h)) {
        throw new CtxError("EACCES", `${what} lies in CortexFS's private state ("${h}")`);
      }
    }
    const covered = b.mode === "rw" ? [...p.hidden, ...p.tree] : p.hidden;
    for (const h of covered) {
      if (under(h, b.src)) masks.add(join(b.dst, first(h, b.src)));
    }
  }
  return [...masks];
}
