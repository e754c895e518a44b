/** A directory listing snapshot, kept as ready-made `fuse_dirent` records that READDIR copies out. */
import { ATTR, DIRENT, ENTRY_OUT } from "../abi/fuse.ts";

/** Size of the `fuse_entry_out` + `fuse_attr` that heads each `fuse_direntplus` (128). */
const ENTRY_PLUS = ENTRY_OUT.size + ATTR.size;

/**
 * The records of one OPENDIR, in order; entry i carries offset i + 1 (the kernel resumes at an
 * offset). Building the wire bytes once costs less than an object per entry plus an encode per
 * READDIR: `ls -l` of 10,000 files is mostly this listing at production timeouts.
 */
export class Listing {
  #buf = new Uint8Array(4096);
  #view = new DataView(this.#buf.buffer);
  #len = 0;
  /** Byte position of each record; one more at the end. */
  #starts: number[] = [0];

  /** Number of entries. */
  get size(): number {
    return this.#starts.length - 1;
  }

  /** Appends an entry whose name is `src[start..end)`. */
  add(src: Uint8Array, start: number, end: number, type: number, ino: number): void {
    const namelen = end - start;
    const rec = (DIRENT.size + namelen + 7) & ~7;
    if (this.#len + rec > this.#buf.length) this.#grow(this.#len + rec);
    const at = this.#len;
    DIRENT.write(this.#view, at, { ino, off: this.size + 1, namelen, type });
    this.#buf.set(src.subarray(start, end), at + DIRENT.size);
    this.#buf.fill(0, at + DIRENT.size + namelen, at + rec);
    this.#len += rec;
    this.#starts.push(this.#len);
  }

  /** Appends an entry with a name of its own. */
  addName(name: Uint8Array, type: number, ino: number): void {
    this.add(name, 0, name.length, type, ino);
  }

  /** Copies the whole records from entry `offset` on that fit in `size` bytes into `out`; returns the bytes used. */
  page(offset: number, size: number, out: Uint8Array): number {
    const starts = this.#starts;
    if (offset >= starts.length - 1) return 0;
    const first = starts[offset];
    let last = offset;
    while (last + 1 < starts.length && starts[last + 1] - first <= size) last++;
    out.set(this.#buf.subarray(first, starts[last]), 0);
    return starts[last] - first;
  }

  /**
   * READDIRPLUS: `fuse_direntplus` records (a 128-byte `fuse_entry_out` + attributes, then the
   * entry's `fuse_dirent`) from entry `offset` on that fit in `size` bytes. `entry(name, dest)`
   * fills `dest` (128 bytes, zeroed: nodeid 0 means "no entry, look it up") and is only called for
   * a record that is sent, so every node reference it takes reaches the kernel. Returns bytes used.
   */
  pagePlus(
    offset: number,
    size: number,
    out: Uint8Array,
    entry: (name: Uint8Array, dest: Uint8Array) => void,
  ): number {
    const starts = this.#starts;
    let used = 0;
    for (let i = offset; i < starts.length - 1; i++) {
      const rec = starts[i + 1] - starts[i];
      if (used + ENTRY_PLUS + rec > size) break;
      const dest = out.subarray(used, used + ENTRY_PLUS);
      dest.fill(0);
      const namelen = this.#view.getUint32(starts[i] + 16, true);
      const nameAt = starts[i] + DIRENT.size;
      entry(this.#buf.subarray(nameAt, nameAt + namelen), dest);
      out.set(this.#buf.subarray(starts[i], starts[i + 1]), used + ENTRY_PLUS);
      used += ENTRY_PLUS + rec;
    }
    return used;
  }

  #grow(min: number): void {
    const b = new Uint8Array(Math.max(min, this.#buf.length * 2));
    b.set(this.#buf.subarray(0, this.#len));
    this.#buf = b;
    this.#view = new DataView(b.buffer);
  }
}
