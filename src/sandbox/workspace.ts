/** The workspace as the host binds it: an open directory fd (never a path re-resolved), and every `.git` in it read-only. */
import { CtxError, errnoName, ignore } from "../abi/errno.ts";
import { Dir } from "../sys/dir.ts";
import { close, F, fcntl, fstat, O, open, read } from "../sys/libc.ts";
import { mountPoints } from "./mounts.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const S_IFMT = 0o170000, S_IFDIR = 0o040000, S_IFREG = 0o100000;
const DT_DIR = 4, DT_UNKNOWN = 0;

/** A `.git` to bind read-only over the workspace: an O_PATH fd and its path below `/workspace`. */
export interface GitGuard {
  fd: number;
  /** Relative to the workspace root: `.git`, `vendor/lib/.git`. */
  rel: string;
}

/**
 * Bounds of the nested `.git` search (spec/sandbox.md): past `dirs` directories or `found` finds
 * the launch is refused (E2BIG); below `depth` nothing is searched.
 */
export const GIT_SEARCH = { depth: 6, dirs: 16384, found: 64 } as const;
/** Directories the search never enters: their `.git`s are not the user's work. */
const SKIP = new Set([".git", "node_modules"]);

function fail(r: number, what: string, path: string): never {
  throw new CtxError(errnoName(-r), `${what}: cannot open "${path}"`, { path });
}

/**
 * Opens the directory `path` as an O_PATH fd (close-on-exec). `/proc/<pid>/cwd` is a magic link:
 * the fd is that process's own working directory, whatever path names it in any view.
 */
export function openDir(path: string): number {
  const fd = open(enc.encode(path + "\0"), O.PATH | O.DIRECTORY);
  if (fd < 0) fail(fd, "workspace", path);
  return fd;
}

/** A close-on-exec duplicate the caller owns (a connection's fd may close while a run still needs it). */
export function dupFd(fd: number): number {
  const d = fcntl(fd, F.DUPFD_CLOEXEC, 3);
  if (d < 0) throw new CtxError(errnoName(-d), `cannot duplicate workspace fd ${fd}`);
  return d;
}

/** The path of an open fd as this process sees it; ENOENT when the directory was removed. */
export function fdPath(fd: number): string {
  const p = Deno.readLinkSync(`/proc/self/fd/${fd}`);
  if (!p.startsWith("/") || p.endsWith(" (deleted)")) {
    throw new CtxError("ENOENT", `the workspace directory is gone ("${p}")`);
  }
  return p;
}

/** What an fd names: "dir", "file" or "other" (symlinks, FIFOs, sockets, devices). */
function kind(fd: number): "dir" | "file" | "other" {
  const st = fstat(fd);
  if (typeof st === "number") return "other";
  const t = st.mode & S_IFMT;
  return t === S_IFDIR ? "dir" : t === S_IFREG ? "file" : "other";
}

const under = (p: string, d: string) => p === d || p.startsWith(d === "/" ? "/" : d + "/");

/** Up to 64 KiB of a regular file, read as the caller without following a final symlink; null when absent. */
function small(path: string): string | null {
  const fd = open(enc.encode(path + "\0"), O.RDONLY | O.NOFOLLOW | O.NONBLOCK | O.CLOEXEC);
  if (fd < 0) return null;
  try {
    if (kind(fd) !== "file") return null;
    const buf = new Uint8Array(65536);
    const n = read(fd, buf);
    return n > 0 ? dec.decode(buf.subarray(0, n)) : "";
  } finally {
    close(fd);
  }
}

/** `p` resolved as the host's git resolves it (symlinks followed, relative to `from`); null when absent. */
function resolve(p: string, from: string): string | null {
  try {
    return Deno.realPathSync(p.startsWith("/") ? p : `${from}/${p}`);
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.NotCapable);
    return null;
  }
}

/**
 * Paths in a git config text that name what git runs or loads, with what a relative one is
 * relative to: hooks and an fsmonitor program (the worktree), includes and core.worktree (the git
 * dir). An fsmonitor without a `/` is a command git finds on PATH, or `true`: not a path here.
 */
function pathKeys(text: string): { path: string; from: "worktree" | "gitdir" }[] {
  const out: { path: string; from: "worktree" | "gitdir" }[] = [];
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.replace(/^\s+/, "");
    const head = /^\[\s*([A-Za-z0-9.-]+)/.exec(line);
    if (head) section = head[1].toLowerCase();
    const kv = /^(?:\[[^\]]*\]\s*)?([A-Za-z][A-Za-z0-9-]*)\s*=\s*"?([^"#;]*)/.exec(line);
    if (!kv) continue;
    const key = `${section}.${kv[1].toLowerCase()}`, value = kv[2].trim();
    if (!value) continue;
    const path = value.replace(/^~(?=\/)/, Deno.env.get("HOME") ?? "~");
    if (key === "core.hookspath" || (key === "core.fsmonitor" && value.includes("/"))) {
      out.push({ path, from: "worktree" });
    } else if (
      key === "core.worktree" ||
      ((section === "include" || section === "includeif") && kv[1].toLowerCase() === "path")
    ) out.push({ path, from: "gitdir" });
  }
  return out;
}

/**
 * Every `.git` of the workspace open as an O_PATH fd, to be bound read-only, with what the host's
 * git would obey from the workspace root. First and unconditionally `<ws>/.git`:
 * - a directory or file: bound read-only; when absent and `create`, the identity makes it an empty
 *   directory (which git skips: not a repository) so that it is bound read-only too, and the
 *   sandbox cannot `git init` or plant a `.git` the host's git would obey from the workspace;
 * - a symlink, FIFO or device: EACCES (the host's git would follow what the sandbox cannot see);
 * - the git dir a `.git` file names (`gitdir:`), its `commondir`, and every path its configs name
 *   for git to run or load (`core.hooksPath`, `core.fsmonitor`, `core.worktree`, `include.path`):
 *   each one inside the workspace is bound read-only too (what is absent there is EACCES: the
 *   sandbox could create it); the rest lies outside the sandbox's view.
 * Then nested ones (vendored repositories, submodules), down to {@link GIT_SEARCH}'s depth; past
 * its directory or `.git` bound the launch is refused (E2BIG), never run half-protected. Nothing is
 * followed: the walk opens one name at a time with O_NOFOLLOW from directory fds, and a nested
 * `.git` that is a symlink, FIFO or device is not bound (inside it resolves in the sandbox's own
 * view). The walk stays on the workspace's own file system (like `find -xdev`): it never enters
 * another mount, a FUSE mount (/ctx among them) above all. Run it as the identity the sandbox runs
 * as (asUser), so it sees only what that identity may see.
 */
export function gitGuards(workspace: number, o: { create?: boolean } = {}): GitGuard[] {
  const search = new GitSearch(workspace, o.create ?? false);
  try {
    search.root();
    search.walk(search.dir.fd, "", 0);
  } catch (e) {
    for (const g of search.out) close(g.fd);
    throw e;
  } finally {
    search.dir.close();
  }
  return search.out;
}

/** One {@link gitGuards} search: the workspace's directory, the guards found, the bounds' count. */
class GitSearch {
  readonly dir: Dir;
  readonly out: GitGuard[] = [];
  readonly base: string;
  /** Mount points are known by name, so the walk skips them without a single call on them. */
  readonly points: Set<string>;
  visited = 0;

  constructor(workspace: number, readonly create: boolean) {
    this.dir = new Dir(`/proc/self/fd/${workspace}`);
    this.base = fdPath(workspace);
    this.points = new Set(mountPoints() ?? []);
  }

  refuse(why: string): never {
    throw new CtxError("EACCES", `workspace "${this.base}": ${why}; refusing to start the sandbox`);
  }

  bound(what: string): never {
    throw new CtxError(
      "E2BIG",
      `workspace "${this.base}" has ${what}: a nested repository could go unprotected, so the sandbox is not started`,
    );
  }

  /** Binds the host path `real` (inside the workspace) read-only, once. */
  guard(real: string, what: string) {
    const rel = real.slice(this.base.length + 1);
    if (this.out.some((g) => under(rel, g.rel))) return;
    const fd = open(enc.encode(real + "\0"), O.PATH | O.NOFOLLOW | O.CLOEXEC);
    if (fd < 0) this.refuse(`${what} "${rel}" cannot be opened (${errnoName(-fd)})`);
    if (kind(fd) === "other") {
      close(fd);
      this.refuse(`${what} "${rel}" is not a file or directory`);
    }
    this.out.push({ fd, rel });
  }

  /** A path git reads from `from`: guarded when it lies in the workspace, refused when absent there. */
  follow(p: string, from: string, what: string, dir = false): string | null {
    const base = this.base;
    const real = resolve(p, from);
    const lexical = p.startsWith("/") ? p : `${from}/${p}`;
    if (real === null) {
      if (under(lexical, base)) this.refuse(`${what} "${p}" would be created inside the workspace`);
      return null;
    }
    // The workspace itself may be a worktree (`dir`); as hooks or a program it is refused.
    if (real === base) {
      if (!dir) this.refuse(`${what} names the workspace itself`);
    } else if (under(real, base)) this.guard(real, what);
    return real;
  }

  /** The workspace's own `.git`, the git dirs it names, and the paths their configs name. */
  root() {
    const base = this.base;
    const at = { fd: this.dir.fd, name: enc.encode(".git\0") };
    let st = this.dir.lstat(at);
    if (st === -2 && this.create) {
      const r = this.dir.mkdir(at, 0o755);
      // Not creatable by the identity: the sandbox (the same identity, no capability) cannot either.
      if (r < 0 && r !== -17) return;
      st = this.dir.lstat(at);
    }
    if (st === -2 || st === -13) return; // absent (a read-only workspace) or not the identity's to see
    if (typeof st === "number") fail(st, "workspace .git", `${base}/.git`);
    const t = st.mode & S_IFMT;
    if (t !== S_IFDIR && t !== S_IFREG) {
      this.refuse("its .git is a symlink or special file, which the host's git would follow");
    }
    this.guard(`${base}/.git`, ".git");
    const gitdirs = [`${base}/.git`];
    if (t === S_IFREG) {
      const line = /^gitdir:\s*(.*?)\s*$/m.exec(small(`${base}/.git`) ?? "");
      const g = line ? this.follow(line[1], base, "the gitdir of .git") : null;
      if (g) gitdirs.push(g);
    }
    for (const g of [...gitdirs]) {
      const common = small(`${g}/commondir`)?.trim();
      const c = common ? this.follow(common, g, "commondir") : null;
      if (c) gitdirs.push(c);
    }
    for (const g of gitdirs) {
      for (const f of ["config", "config.worktree"]) {
        for (const k of pathKeys(small(`${g}/${f}`) ?? "")) {
          this.follow(
            k.path,
            k.from === "gitdir" ? g : base,
            `"${k.path}" in ${g}/${f}`,
            k.from === "gitdir",
          );
        }
      }
    }
  }

  /** The nested `.git` entries below the directory `fd` (at `rel`), within the search's bounds. */
  walk(fd: number, rel: string, depth: number) {
    const { dir, out, base } = this;
    const names: { name: string; type: number }[] = [];
    dir.scan({ fd, name: enc.encode(".\0") }, (buf, start, end, type) => {
      names.push({ name: dec.decode(buf.subarray(start, end)), type });
    });
    for (const { name, type } of names) {
      const at = { fd, name: enc.encode(name + "\0") };
      const path = rel ? `${rel}/${name}` : name;
      if (name === ".git") {
        if (!rel) continue; // the root's, bound above
        const g = dir.open(at, O.PATH);
        if (g < 0) continue; // a symlink (ELOOP) or gone: nothing to protect outside the view
        if (kind(g) === "other") close(g);
        else if (out.length >= GIT_SEARCH.found) {
          close(g);
          this.bound(`more than ${GIT_SEARCH.found} .git entries`);
        } else out.push({ fd: g, rel: path });
        continue;
      }
      if (SKIP.has(name) || depth >= GIT_SEARCH.depth) continue;
      if (type !== DT_DIR && type !== DT_UNKNOWN) continue;
      if (this.points.has(base === "/" ? `/${path}` : `${base}/${path}`)) continue;
      const sub = dir.open(at, O.RDONLY | O.DIRECTORY | O.NONBLOCK);
      if (sub < 0) continue; // not ours to read
      if (++this.visited > GIT_SEARCH.dirs) {
        close(sub);
        this.bound(`more than ${GIT_SEARCH.dirs} directories to search for .git`);
      }
      try {
        this.walk(sub, path, depth + 1);
      } finally {
        close(sub);
      }
    }
  }
}
