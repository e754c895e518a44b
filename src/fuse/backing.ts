/** The backing tree as the mount reaches it: parent directories opened beneath the generation without following any symlink, cached by path. */
import { type At, Dir } from "../sys/dir.ts";
import * as libc from "../sys/libc.ts";
import type { Stat } from "../sys/libc.ts";

/** An open parent directory: its fd and which directory it was when opened. */
export interface Open {
  fd: number;
  dev: number;
  ino: number;
}

/** Where a backing call goes: the parent directory's path and the final name (see {@link Backing.at}). */
export interface Place {
  /** The parent directory, relative to the generation ("" is the generation itself). */
  parent: string;
  /** The final component, NUL-terminated (`.` for the generation itself). */
  name: Uint8Array;
  /** Open the parent afresh for every call: its backing tree changes behind the mount. */
  fresh: boolean;
  /**
   * Backing's memo of its lookups for this place, each valid while the cache is at the version
   * it was made at (any entry added or dropped moves the version): the parent's cached fd, and
   * this path's own cached directory (null: none). Saves a string-keyed Map lookup per call.
   */
  memo: { version: number; parent: Open | null; ownVersion: number; own: Open | null };
}

/** A fresh {@link Place.memo}: nothing known yet. */
export function noMemo(): Place["memo"] {
  return { version: -1, parent: null, ownVersion: -1, own: null };
}

/** More cached directory fds than this and the cache starts over (fds are cheap, not free). */
const MAX_DIRS = 1024;

/**
 * The generation directory and the directories below it that backing calls name a file in.
 *
 * A user can change parts of the backing tree directly (an agent's home is bound into its
 * sandbox), so a path walked by the kernel as root could meet a symlink the user swapped in
 * after the mount looked the path up. Here no path is ever walked that way: a parent directory is
 * opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) (ELOOP on any
 * symlink, EXDEV on a climb out), and the call on the final name never follows it (src/sys/dir.ts).
 *
 * Parents are cached by path (one fstatat on a cached fd is cheaper than the whole relative walk
 * was), except in areas written behind the mount's back (`fresh`), where a path must mean what
 * the backing tree says now. A cached fd keeps naming the directory it opened, so the cache is
 * dropped under a path when the mount renames or removes it, and when a stat of the path finds a
 * different (or no) directory there ({@link seen}).
 */
export class Backing {
  /** The generation directory. */
  readonly dir: Dir;
  #dirs = new Map<string, Open>();
  /** Moves whenever {@link #dirs} gains or loses an entry (see {@link Place.memo}). */
  #version = 0;
  /** fds no longer cached (or opened for one call): closed at the next {@link settle}. */
  #retired: number[] = [];

  constructor(root: string) {
    this.dir = new Dir(root);
  }

  /**
   * The fd of directory `path` ("" is the generation), opened beneath the generation without
   * following a symlink in any component; or -errno (ELOOP: a symlink on the way). `fresh`:
   * opened for this request only (see {@link Place.fresh}).
   */
  dirFd(path: string, fresh = false): number {
    if (path === "") return this.dir.fd;
    if (!fresh) {
      const d = this.#dirs.get(path);
      if (d !== undefined) return d.fd;
    }
    const fd = this.dir.beneath(libc.cstr(path));
    if (fd < 0) return fd;
    if (fresh) {
      this.#retired.push(fd); // used for this request only
      return fd;
    }
    const st = libc.fstat(fd);
    if (typeof st === "number") {
      libc.close(fd);
      return st;
    }
    this.#dirs.set(path, { fd, dev: st.dev, ino: st.ino });
    this.#version++;
    return fd;
  }

  /** The directory fd and name a backing call on `place` takes, or -errno. */
  at(place: Place): At | number {
    const fd = this.parentFd(place);
    return fd < 0 ? fd : { fd, name: place.name };
  }

  /** The fd of `place`'s parent directory ({@link dirFd}), or -errno. */
  parentFd(place: Place): number {
    if (place.fresh || place.parent === "") return this.dirFd(place.parent, place.fresh);
    const m = place.memo;
    if (m.version === this.#version && m.parent !== null) return m.parent.fd;
    const fd = this.dirFd(place.parent);
    if (fd < 0) return fd;
    m.parent = this.#dirs.get(place.parent) ?? null;
    m.version = this.#version;
    return fd;
  }

  /**
   * Notes what a stat found at `place` (the path `path`): a cached fd of another (or no)
   * directory there is dropped, with those below it.
   */
  seen(path: string, st: Pick<Stat, "ino" | "dev"> | number, place?: Place): void {
    const d = this.cachedAt(path, place);
    if (d === null) return;
    if (typeof st === "number" || st.ino !== d.ino || st.dev !== d.dev) this.forget(path);
  }

  /**
   * The cached directory fd of `path` itself (memoized on `place`), or null: what {@link seen}
   * checks a stat against. A caller that has not decoded its stat asks this first.
   */
  cachedAt(path: string, place?: Place): Open | null {
    if (this.#dirs.size === 0) return null;
    const m = place?.memo;
    if (m !== undefined && m.ownVersion === this.#version) return m.own;
    const d = this.#dirs.get(path) ?? null;
    if (m !== undefined) {
      m.own = d;
      m.ownVersion = this.#version;
    }
    return d;
  }

  /** Drops the cached fds of `path` and everything below it (renamed or removed). */
  forget(path: string): void {
    if (this.#dirs.size === 0) return;
    const below = path + "/";
    for (const [p, d] of this.#dirs) {
      if (p === path || p.startsWith(below)) {
        this.#dirs.delete(p);
        this.#retired.push(d.fd);
        this.#version++;
      }
    }
  }

  /**
   * Closes what was retired and bounds the cache. Called before each request, when no {@link At}
   * is held: an fd is never closed (and its number reused) under a call still using it.
   */
  settle(): void {
    if (this.#dirs.size > MAX_DIRS) {
      for (const d of this.#dirs.values()) this.#retired.push(d.fd);
      this.#dirs.clear();
      this.#version++;
    }
    if (this.#retired.length === 0) return;
    for (const fd of this.#retired) libc.close(fd);
    this.#retired.length = 0;
  }

  /** How many parent directories are cached (tests). */
  get cached(): number {
    return this.#dirs.size;
  }
}
