/** The node table: kernel node ids <-> ABI paths, hard-link aliases, lookup counts, moves on rename. */

/** One node the kernel knows by id. */
export interface Node {
  /** Node id given to the kernel (1 = root); never reused within a mount. */
  id: number;
  /** The ABI path used for backing operations ("" = root); null once every name is gone. */
  path: string | null;
  /** Other names of the same file (hard links), so the kernel sees one inode for all of them. */
  alts: string[];
  /** Outstanding kernel references (LOOKUP/CREATE/MKDIR/LINK replies minus FORGETs). */
  lookups: number;
  /** Backing identity (inode number (home/ and shared/ are one backing file system)) when the file has several names. */
  key?: string;
  /** What the file system derived from `path` (it checks the path still matches before use). */
  memo?: { path: string };
  /**
   * How the node's open backing files do I/O while any is open: `backing` > 0 is the passthrough
   * id they share (the kernel wants every open of an inode in one mode, with one backing file),
   * 0 served here. `opens` counts them.
   */
  io?: { backing: number; opens: number };
  /**
   * Until when (performance.now() ms) the kernel holds this name and its attributes as fresh: the
   * last entry reply's timeout. READDIRPLUS leaves such entries out (the kernel has them); an open
   * for writing clears it (a write changes attributes the kernel then asks for).
   */
  until?: number;
  /**
   * The backing inode number whose attributes the kernel was last given for this node (entry and
   * attribute replies): an OPEN by name checks the file it opened is this one (files.ts), since
   * the kernel checked permissions against those attributes.
   */
  ino?: number;
  /** Children found by LOOKUP under this directory node, by name (see {@link Nodes.child}). */
  kids?: Map<number, Node>;
  /** Where this node is listed as a child: its parent's `kids`, its name there and the name's hash. */
  up?: { kids: Map<number, Node>; name: string; hash: number };
}

/** Maps ids and paths both ways; the root is id 1 with path "". */
export class Nodes {
  #byId = new Map<number, Node>();
  #byPath = new Map<string, Node>();
  #byKey = new Map<string, Node>();
  #next = 2;
  /** The two nodes most recently asked for or referenced (see {@link get}); never a forgotten one. */
  #hot0: Node;
  #hot1: Node;

  constructor() {
    const root = node(1, "", 1);
    this.#hot0 = this.#hot1 = root;
    this.#byId.set(1, root);
    this.#byPath.set("", root);
  }

  /** The node with id `id`, if the kernel still holds it. */
  get(id: number): Node | undefined {
    // The request after a LOOKUP is nearly always about the node it answered (stat: LOOKUP, then
    // GETATTR) or its directory: the last two nodes handed out or asked for skip the id Map.
    const a = this.#hot0, b = this.#hot1;
    if (a.id === id) return a;
    if (b.id === id) {
      this.#hot1 = a;
      this.#hot0 = b;
      return b;
    }
    const n = this.#byId.get(id);
    if (n !== undefined) this.#hot(n);
    return n;
  }

  #hot(n: Node): void {
    if (this.#hot0 !== n) {
      this.#hot1 = this.#hot0;
      this.#hot0 = n;
    }
  }

  /**
   * The child `name` of directory node `parent`, as an earlier LOOKUP found it: a LOOKUP of a
   * known name then builds no path string and hashes none. Only nodes with one name are listed,
   * and every change of a node's path ({@link drop}, {@link move}, {@link alias}, FORGET) takes
   * it out of its parent's list, so a listed child's path is its parent's path plus `name`.
   */
  child(parent: Node, name: string): Node | undefined {
    const kids = parent.kids;
    if (kids === undefined) return undefined;
    const n = kids.get(nameHash(name));
    // Keyed by a hash of the name: a Map lookup by a string just read from the request would hash
    // it in V8's runtime; the name itself decides. Two names with one hash: the later one is not
    // listed (adopt), and takes the path-building LOOKUP.
    return n !== undefined && (n.up as { name: string }).name === name ? n : undefined;
  }

  /** Lists the node at `path` as the child `name` of `parent` (after a LOOKUP found it there). */
  adopt(parent: Node, name: string, path: string): void {
    const n = this.#byPath.get(path);
    if (n === undefined || n.path !== path || n.alts.length > 0 || n.up !== undefined) return;
    const kids = parent.kids ??= new Map();
    const hash = nameHash(name);
    const old = kids.get(hash);
    if (old !== undefined) {
      if ((old.up as { name: string }).name !== name) return; // another name, same hash
      unlist(old);
    }
    kids.set(hash, n);
    n.up = { kids, name, hash };
  }

  /** The node currently at `path`, if any. */
  at(path: string): Node | undefined {
    return this.#byPath.get(path);
  }

  /**
   * The node for `path` with one more kernel reference (a LOOKUP-style reply). `key` is the
   * backing inode number (home/ and shared/ are one backing file system) of a file with several names: a known key makes `path` another name of
   * that node, so every hard link shares one kernel inode (and its attributes).
   */
  ref(path: string, key?: string): Node {
    let n = this.#byPath.get(path);
    if (!n && key !== undefined) {
      const k = this.#byKey.get(key);
      if (k && k.path !== null) {
        unlist(k); // a second name
        k.alts.push(path);
        this.#byPath.set(path, k);
        n = k;
      }
    }
    if (!n) {
      n = node(this.#next++, path, 0);
      this.#byId.set(n.id, n);
      this.#byPath.set(path, n);
    }
    if (key !== undefined && n.key === undefined) {
      n.key = key;
      this.#byKey.set(key, n);
    }
    n.lookups++;
    this.#hot(n);
    return n;
  }

  /** A node without a name (an O_TMPFILE file), with one kernel reference; LINK may name it later. */
  anon(): Node {
    const n = node(this.#next++, null, 1);
    this.#byId.set(n.id, n);
    return n;
  }

  /** One more kernel reference to a node already found with {@link at} (LOOKUP of a known name). */
  reref(n: Node): Node {
    n.lookups++;
    this.#hot(n);
    return n;
  }

  /** LINK: `path` is a new name of `n` (one more kernel reference), known by backing `key`. */
  alias(n: Node, path: string, key: string): Node {
    this.drop(path);
    unlist(n);
    if (n.path === null) n.path = path;
    else n.alts.push(path);
    this.#byPath.set(path, n);
    if (n.key === undefined) {
      n.key = key;
      this.#byKey.set(key, n);
    }
    n.lookups++;
    return n;
  }

  /** FORGET: drops `count` references; the node goes away at zero. */
  forget(id: number, count: number): void {
    const n = this.#byId.get(id);
    if (!n || id === 1) return;
    n.lookups -= count;
    if (n.lookups > 0) return;
    unlist(n);
    this.#byId.delete(id);
    const root = this.#byId.get(1) as Node; // never forgotten
    if (this.#hot1 === n) this.#hot1 = root;
    if (this.#hot0 === n) {
      this.#hot0 = this.#hot1;
      this.#hot1 = root;
    }
    for (const p of n.path === null ? n.alts : [n.path, ...n.alts]) {
      if (this.#byPath.get(p) === n) this.#byPath.delete(p);
    }
    if (n.key !== undefined && this.#byKey.get(n.key) === n) this.#byKey.delete(n.key);
  }

  /** The name at `path` is gone (unlink, rmdir, replaced by rename): the node keeps its other names. */
  drop(path: string): void {
    const n = this.#byPath.get(path);
    if (!n) return;
    this.#byPath.delete(path);
    unlist(n);
    if (n.path === path) {
      n.path = n.alts.shift() ?? null;
      if (n.path === null && n.key !== undefined && this.#byKey.get(n.key) === n) {
        this.#byKey.delete(n.key);
      }
    } else {
      n.alts = n.alts.filter((p) => p !== path);
    }
  }

  /** A rename moved `from` to `to` (replacing whatever was there); descendants move too. */
  move(from: string, to: string): void {
    this.drop(to);
    const n = this.#byPath.get(from);
    if (n) {
      unlist(n); // its descendants stay its children, under the same names
      this.#byPath.delete(from);
      if (n.path === from) n.path = to;
      else n.alts = n.alts.map((p) => (p === from ? to : p));
      this.#byPath.set(to, n);
    }
    const prefix = from + "/";
    const moved: [string, Node][] = [];
    for (const [p, c] of this.#byPath) if (p.startsWith(prefix)) moved.push([p, c]);
    for (const [p, c] of moved) {
      const q = to + "/" + p.slice(prefix.length);
      this.#byPath.delete(p);
      if (c.path === p) c.path = q;
      else c.alts = c.alts.map((a) => (a === p ? q : a));
      this.#byPath.set(q, c);
    }
  }

  /** RENAME_EXCHANGE swapped `a` and `b` (and their subtrees). */
  exchange(a: string, b: string): void {
    const tmp = `\0swap${this.#next}`;
    this.move(a, tmp);
    this.move(b, a);
    this.move(tmp, b);
  }

  /** Number of live nodes (status and tests). */
  get size(): number {
    return this.#byId.size;
  }
}

/**
 * A new node with every field present from the start: nodes then share one hidden class, and the
 * per-request reads of `path`, `memo` and `lookups` stay monomorphic (fields added later, in
 * whatever order requests set them, gave each node its own shape).
 */
function node(id: number, path: string | null, lookups: number): Node {
  return {
    id,
    path,
    alts: [],
    lookups,
    key: undefined,
    memo: undefined,
    io: undefined,
    until: undefined,
    kids: undefined,
    up: undefined,
  };
}

/** FNV-1a of a name's UTF-16 code units, in 30 bits (a small integer: a Map key V8 hashes inline). */
export function nameHash(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h & 0x3fffffff;
}

/** Takes `n` out of its parent's child list (its path is about to change, or it is gone). */
function unlist(n: Node): void {
  const up = n.up;
  if (up === undefined) return;
  if (up.kids.get(up.hash) === n) up.kids.delete(up.hash);
  n.up = undefined;
}

/** `dir/name`, with the root's children having no leading slash. */
export function join(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}
