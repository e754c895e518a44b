/** The terminal resource on disk: metadata files replaced atomically, events.jsonl appended in whole lines with output coalesced. */
import { Buffer } from "node:buffer";
import { CtxError, errnoName } from "../abi/errno.ts";
import {
  MAX_OUTPUT_CHUNK,
  type TerminalEvent,
  type TerminalMeta,
  type TerminalState,
} from "../abi/terminal.ts";
import { replaceFile } from "../store/atomic.ts";
import { GroupCommit } from "../store/commit.ts";
import { openRegular, sizeOf } from "../store/regular.ts";
import { asUser, type FsId } from "../sys/fsid.ts";
import * as libc from "../sys/libc.ts";

/** How long output may wait to be coalesced into one `pty.output` event. */
export const COALESCE_MS = 15;

/** An event as the caller gives it: seq and ts are the recorder's. */
export type EventBody = TerminalEvent extends infer E
  ? E extends TerminalEvent ? Omit<E, "seq" | "ts"> : never
  : never;

const enc = new TextEncoder();

/** Unix seconds with a millisecond fraction. */
function now(): number {
  return Math.round(Date.now()) / 1000;
}

/**
 * Writes one terminal resource directory. Each event is one line written with write(2) on an
 * O_APPEND fd (a short write is completed, a failed one cut back off), `seq` counts up from 1,
 * and an fsync is shared by every line written while the previous one ran (group commit, off the
 * JS thread). Metadata (`meta.json state status owner cwd`) is replaced by temp file + rename.
 */
export class Recorder {
  readonly dir: string;
  meta: TerminalMeta;
  #fd: number;
  #size: number;
  #seq = 0;
  #parts: Uint8Array[] = [];
  #partLen = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #commit: GroupCommit;
  #syncs = new Set<Promise<void>>();
  #as?: FsId;
  #failed = false;
  #syncing = false;
  #dirty = false;

  private constructor(dir: string, meta: TerminalMeta, fd: number, as?: FsId) {
    this.dir = dir;
    this.meta = meta;
    this.#fd = fd;
    this.#size = sizeOf(fd, `${dir}/events.jsonl`);
    this.#commit = new GroupCommit(`${dir}/events.jsonl`);
    this.#as = as;
  }

  /**
   * Creates the resource directory `dir` (mode 0700; its missing parents too) and its files with
   * `state` created. A directory that already holds an events.jsonl is refused (EEXIST): every
   * terminal run is a resource of its own. With `as`, every file is made as that identity.
   */
  static create(dir: string, meta: TerminalMeta, options: { as?: FsId } = {}): Recorder {
    const run = <T>(fn: () => T): T => options.as ? asUser(options.as, fn) : fn();
    const fd = run(() => {
      Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
      Deno.chmodSync(dir, 0o700);
      try {
        Deno.lstatSync(`${dir}/events.jsonl`);
        throw new CtxError("EEXIST", "this terminal resource was already recorded", { path: dir });
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
      return openRegular(`${dir}/events.jsonl`, { append: true, create: 0o600 });
    });
    const r = new Recorder(dir, meta, fd, options.as);
    r.#writeMeta();
    return r;
  }

  /** The last seq written. */
  get seq(): number {
    return this.#seq;
  }

  /** Records output bytes: coalesced into events of at most {@link MAX_OUTPUT_CHUNK} bytes. */
  output(bytes: Uint8Array): void {
    this.#parts.push(bytes);
    this.#partLen += bytes.length;
    while (this.#partLen >= MAX_OUTPUT_CHUNK) this.#flushOutput(MAX_OUTPUT_CHUNK);
    if (this.#partLen > 0 && this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#flushOutput(this.#partLen);
      }, COALESCE_MS);
    }
  }

  /** Records one event (pending output is written first: the order of the stream is kept). */
  event(body: EventBody): void {
    this.#flushOutput(this.#partLen);
    this.#line({ seq: ++this.#seq, ts: now(), ...body } as TerminalEvent);
  }

  /** Replaces the metadata with `patch` applied; `state`/`status` follow `patch.state`. */
  update(patch: Partial<TerminalMeta>): void {
    this.meta = { ...this.meta, ...patch };
    this.#writeMeta();
  }

  /** Sets the state (and metadata fields with it). */
  setState(state: TerminalState, patch: Partial<TerminalMeta> = {}): void {
    this.update({ ...patch, state });
  }

  /** Writes what is pending and waits until every line is durable; closes the file. */
  async close(): Promise<void> {
    this.#flushOutput(this.#partLen);
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#sync();
    while (this.#syncs.size) await Promise.allSettled([...this.#syncs]);
    libc.close(this.#fd);
    this.#fd = -1;
  }

  #flushOutput(n: number): void {
    if (n <= 0 || this.#partLen === 0) return;
    const take = Math.min(n, this.#partLen);
    const chunk = new Uint8Array(take);
    let off = 0;
    while (off < take) {
      const p = this.#parts[0];
      const k = Math.min(p.length, take - off);
      chunk.set(p.subarray(0, k), off);
      off += k;
      if (k === p.length) this.#parts.shift();
      else this.#parts[0] = p.subarray(k);
    }
    this.#partLen -= take;
    if (this.#partLen === 0 && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const data_b64 = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length).toString("base64");
    this.#line({ seq: ++this.#seq, ts: now(), type: "pty.output", data_b64 });
  }

  #line(e: TerminalEvent): void {
    if (this.#fd < 0 || this.#failed) return;
    const bytes = enc.encode(JSON.stringify(e) + "\n");
    let off = 0;
    while (off < bytes.length) {
      const n = libc.write(this.#fd, bytes.subarray(off));
      if (n < 0 && -n === 4) continue; // EINTR
      if (n <= 0) {
        // A line cut short would glue the next one to it: cut it back off and stop recording.
        libc.ftruncate(this.#fd, this.#size);
        this.#failed = true;
        const err = new CtxError(errnoName(-n), "cannot append to events.jsonl", {
          path: `${this.dir}/events.jsonl`,
        });
        console.error(`ctxterm: ${err.errno}: ${err.path}: ${err.message}; recording stopped`);
        return;
      }
      off += n;
    }
    this.#size += bytes.length;
    this.#sync();
  }

  // One fsync in flight at a time; lines written meanwhile are covered by one more afterwards.
  #sync(): void {
    if (this.#fd < 0) return;
    if (this.#syncing) {
      this.#dirty = true;
      return;
    }
    const dup = libc.fcntl(this.#fd, libc.F.DUPFD_CLOEXEC, 3);
    if (dup < 0) return;
    this.#syncing = true;
    const p: Promise<void> = this.#commit.sync(dup).catch((e) => {
      console.error(`ctxterm: ${String(e)}`);
    }).finally(() => {
      this.#syncs.delete(p);
      this.#syncing = false;
      if (this.#dirty) {
        this.#dirty = false;
        this.#sync();
      }
    });
    this.#syncs.add(p);
  }

  #writeMeta(): void {
    const m = this.meta;
    const files: [string, string][] = [
      ["owner", `${m.owner}\n`],
      ["cwd", `${m.cwd}\n`],
      ["meta.json", JSON.stringify(m) + "\n"],
      ["state", `${m.state}\n`],
      ["status", `${m.state}\n`],
    ];
    const write = () => {
      for (const [name, text] of files) replaceFile(`${this.dir}/${name}`, text, { mode: 0o600 });
    };
    if (this.#as) asUser(this.#as, write);
    else write();
  }
}
