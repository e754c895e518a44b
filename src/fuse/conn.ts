/** One FUSE connection: the hybrid read loop over /dev/fuse, request parsing from the opcode table, replies. */
import {
  type ArgOf,
  decode,
  encode,
  IN_HEADER,
  INIT,
  INIT2,
  INIT_OUT,
  KERNEL_VERSION,
  MAX_WRITE,
  OP,
  OPCODES,
  type OpName,
  OUT_HEADER,
  READ_BUFFER,
} from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { POLL, PollFds } from "../sys/poll.ts";

/** What every request carries, whatever its opcode. */
interface Head {
  unique: number;
  nodeid: number;
  uid: number;
  gid: number;
  pid: number;
  /** Trailing NUL-terminated names (LOOKUP: the name; RENAME: old, new; SYMLINK: name, target). */
  names: string[];
  /** WRITE data, BATCH_FORGET entries or raw trailing bytes; a view into the read buffer, valid only synchronously. */
  data: Uint8Array;
}

/**
 * One parsed request of opcode `N` (any opcode by default): a union discriminated by `opcode`,
 * whose `arg` is that opcode's fixed input struct, decoded (no fields when it has none). A type
 * only: the kernel is the trusted side of /dev/fuse, so nothing is checked at run time beyond
 * the struct's length.
 */
export type Request<N extends OpName = OpName> = {
  [K in N]: Head & { opcode: (typeof OP)[K]; arg: ArgOf<K> };
}[N];

/**
 * What a handler answers: a negative number is -errno, 0 or a positive number is the length of the
 * payload it wrote into `out` (the shared reply area, only valid for synchronous answers), and a
 * Uint8Array is a payload of its own. A Promise resolves later to -errno, 0 or a Uint8Array.
 */
export type Answer = number | Uint8Array;

/** A request handler; `out` is the reply payload area (1 MiB) it may fill synchronously. */
export type Handler<N extends OpName = OpName> = (
  req: Request<N>,
  out: Uint8Array,
) => Answer | Promise<Answer>;

/** Handlers keyed by opcode number, each typed for its opcode's request. */
export type Handlers = { [K in OpName as (typeof OP)[K]]?: Handler<K> };

/**
 * The handler `fs` has for `opcode`, taking any request: sound because the connection decodes
 * `arg` by the same opcode's table row (the one place the per-opcode types meet a number).
 */
export function handlerOf(fs: FileSystem, opcode: number): Handler | undefined {
  return (fs.handlers as Partial<Record<number, Handler>>)[opcode];
}

/** The file system a connection serves: handlers by opcode number, plus forget. */
export interface FileSystem {
  /** Handlers keyed by opcode; an opcode without one answers ENOSYS. */
  handlers: Handlers;
  /** Called before each request's handler runs (not before FORGET, INIT or INTERRUPT). */
  before?(): void;
  /** FORGET / BATCH_FORGET: drop `nlookup` references to `nodeid` (no reply). */
  forget(nodeid: number, nlookup: number): void;
  /**
   * INIT was answered: the file system may note what was negotiated. `passthrough`: OPEN and
   * CREATE may hand a file's I/O to a backing file registered on `fd` (the /dev/fuse fd).
   */
  init?(flags: number, options: { passthrough: boolean; fd: number }): void;
}

/** Options for {@link Conn}. */
export interface ConnOptions {
  /** Print one `rx`/`tx` line per request and reply to stderr. */
  debug?: boolean;
  /** How long an idle wait first blocks the JS thread before yielding (ms, default 1; 0 = never); not with `wake`, unless an answer is pending. */
  waitMs?: number;
  /** Where unexpected handler exceptions are logged (default: console.error). */
  log?: (line: string) => void;
  /** Ask for FUSE passthrough when the kernel offers it (default true; see {@link FileSystem.init}). */
  passthrough?: boolean;
  /**
   * An eventfd other threads ring when this thread's event loop needs a turn (a message for it).
   * Given, an idle wait with no answer pending blocks this thread in poll(2) on the device and
   * this fd, with no timeout: only for a thread that has nothing else to do (the mount's worker).
   */
  wake?: number;
  /** Called on this thread when it wakes for requests (false), and every 128 requests of a burst (true). */
  tick?: (burst: boolean) => void;
}

const dec = new TextDecoder();
const NO_ARG: Record<string, number> = Object.freeze({});
const NO_NAMES: string[] = Object.freeze([]) as unknown as string[];
const NO_DATA = new Uint8Array(0);

const HI = 0x1_0000_0000;

/**
 * A u64 field as a number: a small integer stays one (computed through a double it would be kept
 * boxed in the request object, two allocations per request more).
 */
function u64(view: DataView, at: number): number {
  const lo = view.getUint32(at, true), hi = view.getUint32(at + 4, true);
  return hi === 0 && lo < 0x4000_0000 ? lo | 0 : lo + hi * HI;
}

/** An opcode's name, for messages. */
function nameOf(opcode: number): string {
  return OPCODES[opcode]?.name ?? `op${opcode}`;
}

/** Names recently read, by a hash of their bytes (see {@link text}). */
const names = new Map<number, string>();
const MAX_NAMES = 4096;

/**
 * A name from the request buffer. Names repeat (a stat loop, a build tree), so one seen before is
 * that same string again: found by a hash of its bytes, its bytes compared, nothing allocated
 * (building one char by char made a new string per char). Others are decoded: short ASCII ones
 * without the TextDecoder call.
 */
function text(buf: Uint8Array, start: number, end: number): string {
  if (end - start > 32) return dec.decode(buf.subarray(start, end));
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ buf[i], 0x01000193);
  h &= 0x3fffffff;
  const known = names.get(h);
  if (known !== undefined && known.length === end - start) {
    let i = 0;
    while (i < known.length && known.charCodeAt(i) === buf[start + i]) i++;
    if (i === known.length) return known;
  }
  let s = "";
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c >= 0x80) return dec.decode(buf.subarray(start, end)); // not kept: compared as bytes above
    s += String.fromCharCode(c);
  }
  if (names.size >= MAX_NAMES) names.clear();
  names.set(h, s);
  return s;
}

/** Serves one FUSE session on an fd (already mounted) until unmount (ENODEV) or DESTROY. */
export class Conn {
  readonly fd: number;
  #fs: FileSystem;
  #debug: boolean;
  #log: (line: string) => void;
  #buf = new Uint8Array(READ_BUFFER);
  #view = new DataView(this.#buf.buffer);
  #reply = new Uint8Array(16 + MAX_WRITE + 4096);
  #replyView = new DataView(this.#reply.buffer);
  #out = this.#reply.subarray(16);
  #drain = new Uint8Array(8);
  #stopped = false;
  #spinMs: number;
  #passthrough: boolean;
  #wake: number;
  #tick: ((burst: boolean) => void) | undefined;
  /** Idle waits on the JS thread: the device and the wake fd, refilled per wait. */
  #idle = new PollFds(2);
  /** Answers still to come (Promises): their settling needs the event loop. */
  #pending = 0;
  /** Set by {@link unblock}: every idle wait goes through the event loop. */
  #unblocked = false;
  /** Number of requests served (for the status file and benchmarks). */
  served = 0;
  /** Requests whose handler threw (answered EIO). */
  failures = 0;

  constructor(fd: number, fs: FileSystem, options: ConnOptions = {}) {
    this.fd = fd;
    this.#fs = fs;
    this.#debug = !!options.debug;
    this.#log = options.log ?? ((l) => console.error(l));
    this.#spinMs = options.waitMs ?? 1;
    this.#passthrough = options.passthrough ?? true;
    this.#wake = options.wake ?? -1;
    this.#tick = options.tick;
    const fl = libc.fcntl(fd, libc.F.GETFL);
    if (fl >= 0) libc.fcntl(fd, libc.F.SETFL, fl | libc.O.NONBLOCK);
  }

  /** Ends {@link serve} at its next wake-up (used after an unmount we started). */
  stop(): void {
    this.#stopped = true;
  }

  /**
   * From now on idle waits go through the event loop: work of this thread's own (an unmount
   * under way) needs its turns, and no request may be what ends the wait.
   */
  unblock(): void {
    this.#unblocked = true;
  }

  /**
   * The hybrid loop: drain requests with synchronous reads on this thread; when the device is
   * empty, wait: blocked here on the device and the wake fd (`wake` given, no answer pending), else
   * briefly here and then in a nonblocking poll (off-thread). Resolves with why serving ended.
   */
  async serve(): Promise<"unmounted" | "destroyed" | "stopped"> {
    let burst = 0;
    while (!this.#stopped) {
      const n = libc.read(this.fd, this.#buf);
      if (n < 0) {
        if (n === -ERRNO.EAGAIN) {
          if (this.#wake >= 0 && this.#pending === 0 && !this.#unblocked) {
            // Nothing but the device can need this thread: wait for it here, woken directly by
            // the request (no thread hop, no timer). A ring means a message: let the event loop
            // have the rest of this idle wait.
            burst = 0;
            if (!this.#block()) await libc.pollIn(this.fd, 1000);
            this.#tick?.(false);
            continue;
          }
          // A short blocking wait on this thread first: under a sequential load (a stat loop) the
          // next request comes within microseconds, and waking this thread directly costs far less
          // than the thread hop of an async poll. Idle for a millisecond: hand over to the event
          // loop and wait there.
          if (libc.pollInSync(this.fd, this.#spinMs) > 0) continue;
          burst = 0;
          await libc.pollIn(this.fd, 1000);
          this.#tick?.(false);
          continue;
        }
        if (n === -ERRNO.EINTR || n === -ERRNO.ENOENT) continue; // ENOENT: request aborted
        if (n === -ERRNO.ENODEV) return "unmounted";
        throw new Error(`read /dev/fuse: errno ${-n}`);
      }
      if (this.#dispatch(n)) return "destroyed";
      // Under sustained load the device never runs dry; give signals, timers and async replies a
      // turn now and then (a zero-timeout poll is a cheap trip through the event loop).
      if (++burst >= 128) {
        burst = 0;
        this.#tick?.(true);
        await libc.pollIn(this.fd, 0);
      }
    }
    return "stopped";
  }

  /** Waits on this thread for a request or a ring: false when it rang (the ring consumed). */
  #block(): boolean {
    const set = this.#idle;
    set.set(0, this.fd, POLL.IN);
    set.set(1, this.#wake, POLL.IN);
    if (libc.pollSync(set, -1) <= 0 || set.revents(1) === 0) return true; // EINTR: read again
    libc.read(this.#wake, this.#drain);
    return false;
  }

  /** Parses and answers one request of `n` bytes; true when it was DESTROY. */
  #dispatch(n: number): boolean {
    this.served++;
    const view = this.#view;
    if (n < IN_HEADER.size) {
      this.#log(`fuse: short request of ${n} bytes ignored`);
      return false;
    }
    // struct fuse_in_header, read in place (no intermediate object): len u32, opcode u32, unique
    // u64, nodeid u64, uid, gid, pid u32, total_extlen u16, padding u16.
    const opcode = view.getUint32(4, true);
    const spec = OPCODES[opcode];
    // Made a Request by decoding `arg` with this opcode's own table row (below); no other check.
    const raw: Head & { opcode: number; arg: Record<string, number> } = {
      opcode,
      unique: u64(view, 8),
      nodeid: u64(view, 16),
      uid: view.getUint32(24, true),
      gid: view.getUint32(28, true),
      pid: view.getUint32(32, true),
      arg: NO_ARG,
      names: NO_NAMES,
      data: NO_DATA,
    };
    const req = raw as Request;
    let at = IN_HEADER.size + view.getUint16(36, true) * 8;
    if (spec?.input) {
      if (n < at + spec.input.size) return this.#short(req, nameOf(opcode), n);
      raw.arg = decode(spec.input, view, at);
      at += spec.input.size;
    }
    const count = spec?.names ?? 0;
    if (count > 0) {
      const names: string[] = new Array(count); // its length known: no growing per push
      for (let i = 0; i < count; i++) {
        const end = this.#buf.indexOf(0, at);
        if (end < 0 || end >= n) return this.#short(req, nameOf(opcode), n);
        names[i] = text(this.#buf, at, end);
        at = end + 1;
      }
      raw.names = names;
    }
    // A view costs an allocation: only requests that carry bytes get one.
    if (at < n) raw.data = this.#buf.subarray(at, n);
    if (this.#debug) {
      this.#log(
        `rx ${req.unique}: ${nameOf(opcode)} n${req.nodeid} uid=${req.uid} ${
          JSON.stringify(req.arg)
        } ${req.names.map((s) => JSON.stringify(s)).join(" ")}${
          req.data.length ? ` +${req.data.length}B` : ""
        }`,
      );
    }
    switch (req.opcode) {
      case OP.INIT:
        this.#send(req.unique, this.#init(req));
        return false;
      case OP.DESTROY:
        this.#send(req.unique, 0);
        return true;
      case OP.FORGET:
        this.#fs.forget(req.nodeid, req.arg.nlookup);
        return false;
      case OP.BATCH_FORGET: {
        const count = req.arg.count;
        for (let i = 0; i < count && at + 16 * (i + 1) <= n; i++) {
          const o = at + 16 * i;
          const id = view.getUint32(o, true) + view.getUint32(o + 4, true) * HI;
          const nl = view.getUint32(o + 8, true) + view.getUint32(o + 12, true) * HI;
          this.#fs.forget(id, nl);
        }
        return false;
      }
      case OP.INTERRUPT:
        return false; // handlers run to completion; the reply to the original request still goes out
    }
    const handler = handlerOf(this.#fs, opcode);
    if (!spec || !handler) {
      this.#send(req.unique, -ERRNO.ENOSYS);
      return false;
    }
    let answer: Answer | Promise<Answer>;
    try {
      this.#fs.before?.();
      answer = handler(req, this.#out);
    } catch (e) {
      this.#fail(nameOf(opcode), e);
      answer = -ERRNO.EIO;
    }
    if (answer instanceof Promise) {
      const unique = req.unique;
      this.#pending++;
      answer.then(
        (a) => {
          this.#pending--;
          this.#send(unique, typeof a === "number" && a > 0 ? -ERRNO.EIO : a);
        },
        (e) => {
          this.#pending--;
          this.#fail(nameOf(opcode), e);
          this.#send(unique, -ERRNO.EIO);
        },
      );
    } else if (spec.reply) {
      this.#send(req.unique, answer);
    }
    return false;
  }

  #short(req: Request, name: string, n: number): false {
    this.#log(`fuse: ${name} request of ${n} bytes is shorter than its struct: EIO`);
    this.#send(req.unique, -ERRNO.EIO);
    return false;
  }

  #fail(name: string, e: unknown): void {
    this.failures++;
    this.#log(`fuse: ${name} handler failed, answered EIO: ${e instanceof Error ? e.stack : e}`);
  }

  #init(req: Request<"INIT">): Answer {
    const a = req.arg;
    if (a.major !== KERNEL_VERSION.major || a.minor < 28) {
      this.#log(`fuse: kernel protocol ${a.major}.${a.minor} is older than 7.28`);
      return -ERRNO.EPROTO;
    }
    const want = INIT.ASYNC_READ | INIT.ATOMIC_O_TRUNC | INIT.BIG_WRITES | INIT.MAX_PAGES |
      INIT.PARALLEL_DIROPS | INIT.AUTO_INVAL_DATA | INIT.CACHE_SYMLINKS | INIT.HANDLE_KILLPRIV_V2 |
      INIT.DO_READDIRPLUS | INIT.READDIRPLUS_AUTO;
    let flags = a.flags & want;
    // Passthrough (7.40, flags2): only with the extended flags, and never with a writeback cache
    // (not asked for). max_stack_depth 1: the backing tree is a plain file system (an overlay
    // there would need 2, and its files then stay served: BACKING_OPEN answers ELOOP).
    const passthrough = this.#passthrough && a.minor >= 40 && (a.flags & INIT.INIT_EXT) !== 0 &&
      (a.flags2 & INIT2.PASSTHROUGH) !== 0;
    if (passthrough) flags |= INIT.INIT_EXT;
    this.#fs.init?.(flags, { passthrough, fd: this.fd });
    const outView = new DataView(this.#out.buffer, this.#out.byteOffset);
    return encode(INIT_OUT, outView, 0, {
      major: KERNEL_VERSION.major,
      minor: Math.min(a.minor, KERNEL_VERSION.minor),
      max_readahead: a.max_readahead,
      flags,
      max_background: 64,
      congestion_threshold: 48,
      max_write: MAX_WRITE,
      time_gran: 1,
      max_pages: MAX_WRITE / 4096,
      flags2: passthrough ? INIT2.PASSTHROUGH : 0,
      max_stack_depth: passthrough ? 1 : 0,
    });
  }

  /** Writes one reply: the out-header then the payload, in one write(2). */
  #send(unique: number, answer: Answer): void {
    let len = 16;
    let error = 0;
    if (typeof answer === "number") {
      if (answer < 0) error = answer;
      else len += answer;
    } else {
      this.#reply.set(answer, 16);
      len += answer.length;
    }
    // struct fuse_out_header: len u32, error i32, unique u64
    const v = this.#replyView;
    v.setUint32(0, len, true);
    v.setInt32(4, error, true);
    v.setUint32(8, unique >>> 0, true);
    v.setUint32(12, (unique / HI) >>> 0, true);
    const r = libc.write(this.fd, this.#reply, len);
    if (this.#debug) this.#log(`tx ${unique}: ${error ? `error ${-error}` : `ok ${len - 16}B`}`);
    // ENOENT: the request was interrupted and is gone; nothing else to do for it.
    if (r < 0 && r !== -ERRNO.ENOENT && !this.#stopped) {
      this.#log(`fuse: reply to ${unique} failed: errno ${-r}`);
    }
  }
}

/** Sizes of the protocol headers, exported for tests. */
export const HEADER_SIZES = { in: IN_HEADER.size, out: OUT_HEADER.size } as const;
