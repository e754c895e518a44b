/** The workspace as the host binds it: an open directory fd (never a path re-resolved), and every `.git` in it read-only. */
import { CtxError, errnoName } from "../abi/errno.ts";
import { Dir } from "../sys/dir.ts";
import { close, F, fcntl, fstat, O, open } from "../sys/libc.ts";
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

/** Bounds of the nested `.git` search (spec/sandbox.md). */
export const GIT_SEARCH = { depth: 6, dirs: 4096, found: 64 } as const;
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

/**
 * Every `.git` of the workspace open as an O_PATH fd, to be bound read-only: `<ws>/.git` and
 * nested ones (vendored repositories, submodules) down to {@link GIT_SEARCH}'s bounds. Nothing is
 * followed: the walk opens one name at a time with O_NOFOLLOW from directory fds, and a `.git`
 * that is a symlink, FIFO or device is not bound (inside the sandbox it resolves in the sandbox's
 * own view). A `.git` file is bound as that file; its `gitdir:` line is never read. The walk stays
 * on the workspace's own file system (like `find -xdev`): it never enters another mount, a FUSE
 * mount (/ctx among them) above all. Run it as the identity the sandbox runs as (asUser), so it
 * sees only what that identity may see.
 */
export function gitGuards(workspace: number): GitGuard[] {
  const dir = new Dir(`/proc/self/fd/${workspace}`);
  const out: GitGuard[] = [];
  // Mount points are known by name, so the walk skips them without a single call on them.
  const base = fdPath(workspace);
  const points = new Set(mountPoints() ?? []);
  let visited = 0;
  const walk = (fd: number, rel: string, depth: number) => {
    const names: { name: string; type: number }[] = [];
    dir.scan({ fd, name: enc.encode(".\0") }, (buf, start, end, type) => {
      names.push({ name: dec.decode(buf.subarray(start, end)), type });
    });
    for (const { name, type } of names) {
      if (out.length >= GIT_SEARCH.found) return;
      const at = { fd, name: enc.encode(name + "\0") };
      const path = rel ? `${rel}/${name}` : name;
      if (name === ".git") {
        const g = dir.open(at, O.PATH);
        if (g < 0) continue; // a symlink (ELOOP) or gone: nothing to protect outside the view
        if (kind(g) === "other") close(g);
        else out.push({ fd: g, rel: path });
        continue;
      }
      if (SKIP.has(name) || depth >= GIT_SEARCH.depth || visited >= GIT_SEARCH.dirs) continue;
      if (type !== DT_DIR && type !== DT_UNKNOWN) continue;
      if (points.has(base === "/" ? `/${path}` : `${base}/${path}`)) continue;
      const sub = dir.open(at, O.RDONLY | O.DIRECTORY | O.NONBLOCK);
      if (sub < 0) continue; // not ours to read
      visited++;
      try {
        walk(sub, path, depth + 1);
      } finally {
        close(sub);
      }
    }
  };
  try {
    walk(dir.fd, "", 0);
  } catch (e) {
    for (const g of out) close(g.fd);
    throw e;
  } finally {
    dir.close();
  }
  return out;
}
