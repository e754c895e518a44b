/** A directory the prompt reads from (the workspace, the agent home): held as an fd, walked without following anything. */
import { fstat, O, read as readFd } from "../sys/libc.ts";
import { close, cstr } from "../sys/libc.ts";
import { Dir } from "../sys/dir.ts";
import { asUser, type FsId } from "../sys/fsid.ts";

const S_IFMT = 0o170000, S_IFREG = 0o100000;
const DT_DIR = 4, DT_UNKNOWN = 0;
const dec = new TextDecoder();

/** What a read found: the text (at most the bound) and whether the file was longer. */
export interface Read {
  text: string;
  truncated: boolean;
}

/**
 * A directory the prompt runtime reads, named as the agent sees it (`/workspace`,
 * `/home/agent`). Paths are relative, `/`-separated, without `..`; nothing is followed.
 */
export interface Source {
  /** The directory as the agent sees it. */
  readonly at: string;
  /** The regular file `rel`, at most `max` bytes; undefined when absent, not regular or unreadable. */
  read(rel: string, max: number): Read | undefined;
  /** The subdirectory names of `rel` (sorted; symlinks are not directories); [] when absent. */
  dirs(rel: string): string[];
  /** Closes the directory. */
  close(): void;
}

function clean(rel: string): string | undefined {
  const parts = rel.split("/").filter((c) => c !== "" && c !== ".");
  if (parts.some((c) => c === "..")) return undefined;
  return parts.join("/");
}

/**
 * A {@link Source} over the directory `path` (a `/proc/self/fd/<n>` magic link names a held fd
 * itself), every call made as `id` (fsuid/fsgid/groups: the agent reads only what it may read).
 * Subdirectories are opened with openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, files with
 * O_NOFOLLOW | O_NONBLOCK (a FIFO never blocks) and checked regular on the opened fd. Undefined
 * when the directory cannot be opened.
 */
export function dirSource(path: string, options: { at: string; id: FsId }): Source | undefined {
  const id = options.id;
  let dir: Dir;
  try {
    dir = asUser(id, () => new Dir(path));
  } catch {
    // Dir throws one plain Error for any failed open(2): every errno reads as "cannot be opened".
    return undefined;
  }
  // The directory fd of `rel` (the caller closes it unless it is dir.fd), or -errno.
  const sub = (rel: string): number => (rel === "" ? dir.fd : dir.beneath(cstr(rel)));
  const done = (fd: number) => {
    if (fd !== dir.fd) close(fd);
  };
  return {
    at: options.at,
    read(rel, max) {
      const r = clean(rel);
      if (r === undefined || r === "") return undefined;
      const slash = r.lastIndexOf("/");
      return asUser(id, () => {
        const parent = sub(slash < 0 ? "" : r.slice(0, slash));
        if (parent < 0) return undefined;
        try {
          const fd = dir.open(
            { fd: parent, name: cstr(r.slice(slash + 1)) },
            O.RDONLY | O.NONBLOCK | O.NOCTTY,
          );
          if (fd < 0) return undefined;
          try {
            const st = fstat(fd);
            if (typeof st === "number" || (st.mode & S_IFMT) !== S_IFREG) return undefined;
            const buf = new Uint8Array(max + 1);
            let off = 0;
            while (off < buf.length) {
              const n = readFd(fd, buf.subarray(off));
              if (n <= 0) break;
              off += n;
            }
            const truncated = off > max;
            // A cut inside a UTF-8 sequence decodes to one replacement character, never more.
            return { text: dec.decode(buf.subarray(0, Math.min(off, max))), truncated };
          } finally {
            close(fd);
          }
        } finally {
          done(parent);
        }
      });
    },
    dirs(rel) {
      const r = clean(rel);
      if (r === undefined) return [];
      return asUser(id, () => {
        const fd = sub(r);
        if (fd < 0) return [];
        try {
          const names: string[] = [];
          const at = { fd, name: cstr(".") };
          dir.scan(at, (buf, start, end, type) => {
            if (type === DT_DIR) names.push(dec.decode(buf.subarray(start, end)));
            else if (type === DT_UNKNOWN) {
              const name = dec.decode(buf.subarray(start, end));
              const st = dir.lstat({ fd, name: cstr(name) });
              if (typeof st !== "number" && (st.mode & S_IFMT) === 0o040000) names.push(name);
            }
          });
          return names.sort();
        } finally {
          done(fd);
        }
      });
    },
    close() {
      dir.close();
    },
  };
}
