/** The watch/attach client of a terminal socket on the local tty: raw mode (always restored), detach key, window size, snapshot then live output. */
import { CtxError, ignore, isErrno } from "../abi/errno.ts";
import {
  type ClientMode,
  encodeFrame,
  errorFrame,
  exitFrame,
  FRAME,
  frameJson,
  FrameReader,
  helloFrame,
  sizePayload,
} from "../abi/terminal.ts";
import net from "node:net";
import { fdOf, type PeerCred, peerCred } from "../sys/sock.ts";

/** The detach key: Ctrl+] (0x1d), as telnet's escape. Watchers may also leave with Ctrl+C. */
export const DETACH_KEY = 0x1d;
const CTRL_C = 0x03;

/** Resets what a program may have left set on the local terminal, and leaves the alternate screen. */
export const RESTORE = "\x1b[?1049l\x1b[0m\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l" +
  "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l";
/** Written before a snapshot: the local screen starts blank, in the normal buffer, default attributes. */
const CLEAR = "\x1b[?1049l\x1b[0m\x1b[H\x1b[2J\x1b[3J";

const enc = new TextEncoder();

/** Options for {@link join}. */
export interface JoinOptions {
  socket: string;
  mode: ClientMode;
  /** The terminal id expected on this socket (an error when another terminal answers). */
  id?: string;
  /** Print status lines (`[attached ...]`) to stderr; default true. */
  quiet?: boolean;
  /** Uids besides root that may serve the socket (default: {@link namedServers}). */
  servers?: readonly number[];
  /** A connection already made and checked (by {@link resolveSocket}): `socket` only names it. */
  conn?: TermConn;
}

/**
 * A connection to a terminal socket whose server's uid was checked (SO_PEERCRED) before any byte
 * went out: the read/write surface `join` uses, over a node:net socket (Deno's own UnixConn
 * gives no fd to ask the kernel about the peer).
 */
export class TermConn {
  #chunks: Uint8Array[] = [];
  #queued = 0;
  #done = false;
  #wake?: () => void;

  constructor(readonly socket: net.Socket, readonly server: PeerCred) {
    socket.on("data", (b: Uint8Array) => {
      this.#chunks.push(b);
      this.#queued += b.length;
      if (this.#queued > 1 << 20) socket.pause(); // resumed as join reads
      this.#wake?.();
    });
    const end = () => {
      this.#done = true;
      this.#wake?.();
    };
    socket.on("end", end);
    socket.on("close", end);
    socket.on("error", end);
  }

  /** Reads into `buf`: the byte count, or null at the end. */
  async read(buf: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#done) return null;
      await new Promise<void>((r) => this.#wake = r);
      this.#wake = undefined;
    }
    const head = this.#chunks[0];
    const n = Math.min(head.length, buf.length);
    buf.set(head.subarray(0, n));
    if (n === head.length) this.#chunks.shift();
    else this.#chunks[0] = head.subarray(n);
    this.#queued -= n;
    if (this.#queued <= 1 << 20) this.socket.resume();
    return n;
  }

  /** Writes all of `b`. */
  write(b: Uint8Array): Promise<number> {
    return new Promise((resolve, reject) => {
      if (this.socket.destroyed) return reject(new CtxError("EPIPE", "the terminal closed"));
      this.socket.write(b, (e) => e ? reject(e) : resolve(b.length));
    });
  }

  closeWrite(): void {
    this.socket.end();
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A socket that answered, served by a uid we do not trust with our terminal. */
export class WrongServer extends CtxError {}

/**
 * Connects to a terminal socket and checks who serves it before sending a byte: root, or a uid
 * in `servers` (the terminal's owner; default: our own uid). Anyone else (a fake server behind an
 * alias the user may point anywhere) is EACCES: it would read our keys and write to our terminal.
 * ENOENT / ECONNREFUSED / EACCES as the kernel says.
 */
export async function connect(path: string, servers?: readonly number[]): Promise<TermConn> {
  const socket = net.connect({ path, allowHalfOpen: true });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
  } catch (e) {
    socket.destroy();
    const code = (e as { code?: string }).code ?? "";
    const errno = isErrno(code) ? code : "ECONNREFUSED";
    throw new CtxError(errno, `cannot connect to the terminal socket`, { path });
  }
  let cred: PeerCred;
  try {
    cred = peerCred(fdOf(socket));
  } catch (e) {
    socket.destroy();
    throw e;
  }
  const ok = [0, ...(servers ?? [Deno.uid() ?? 0])];
  if (!ok.includes(cred.uid)) {
    socket.destroy();
    throw new WrongServer(
      "EACCES",
      `the terminal socket is served by uid ${cred.uid} (pid ${cred.pid}), not by root or the ` +
        `terminal's owner (uid ${ok.slice(1).join(", ")}): refused before sending anything`,
      { path },
    );
  }
  return new TermConn(socket, cred);
}

/**
 * The uids a socket named on the command line may be served by: ours, and the owner of the path
 * as named (lstat: a symlink's owner, never its target's), whose terminal we asked for.
 */
export function namedServers(path: string): number[] {
  const self = Deno.uid() ?? 0;
  try {
    return [self, Deno.lstatSync(path).uid ?? self];
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.PermissionDenied);
    return [self];
  }
}

async function writeAll(w: { write(b: Uint8Array): Promise<number> }, b: Uint8Array) {
  let off = 0;
  while (off < b.length) off += await w.write(b.subarray(off));
}

function out(b: Uint8Array | string): void {
  const bytes = typeof b === "string" ? enc.encode(b) : b;
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/**
 * Joins the terminal on `socket` as a watcher or an attacher, on this process's stdin/stdout.
 * On a tty stdin is put in raw mode and restored on every way out. Returns 0 after a detach,
 * the program's exit code when it ended meanwhile; a server refusal throws its errno.
 */
export async function join(o: JoinOptions): Promise<number> {
  const conn = o.conn ?? await connect(o.socket, o.servers ?? namedServers(o.socket));
  const tty = Deno.stdin.isTerminal();
  const interactive = tty && Deno.stdout.isTerminal();
  let raw = false;
  let winch: (() => void) | undefined;
  let result: number | undefined;
  let exited = false;
  let stdinReader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const note = (s: string) => {
    if (!o.quiet) Deno.stderr.writeSync(enc.encode(`${raw ? "\r\n" : ""}${s}\r\n`));
  };
  const send = (f: Uint8Array) => writeAll(conn, f).catch(() => {});
  try {
    await writeAll(conn, enc.encode(`${o.mode}\n`));
    if (tty) {
      Deno.stdin.setRaw(true);
      raw = true;
    }
    const sendSize = () => {
      try {
        const { rows, columns } = Deno.consoleSize();
        if (rows > 0 && columns > 0) {
          void send(encodeFrame(FRAME.resize, sizePayload(rows, columns)));
        }
      } catch { /* not a terminal: Deno says so with a plain Error, no kind to match */ }
    };
    if (o.mode === "attach" && interactive) {
      sendSize();
      winch = sendSize;
      Deno.addSignalListener("SIGWINCH", winch);
    }
    // Keys: an attacher's go to the PTY (the detach key excepted); a watcher's only detach.
    const keys = (async () => {
      if (o.mode === "watch" && !tty) return; // nothing to read: a piped watcher just watches
      stdinReader = Deno.stdin.readable.getReader();
      for (;;) {
        const r = await stdinReader.read().catch(() => ({ done: true, value: undefined }));
        if (r.done || !r.value) break;
        const b = r.value;
        const k = b.indexOf(DETACH_KEY);
        const stopAt = o.mode === "watch" && k < 0 ? b.indexOf(CTRL_C) : k;
        if (o.mode === "attach") {
          const part = stopAt < 0 ? b : b.subarray(0, stopAt);
          if (part.length) await send(encodeFrame(FRAME.input, part));
        }
        if (stopAt >= 0) break;
      }
      result ??= 0;
      await send(encodeFrame(FRAME.detach));
      try {
        conn.closeWrite();
      } catch (e) {
        ignore(e, Deno.errors.BadResource, Deno.errors.NotConnected); /* closed */
      }
    })();
    const reader = new FrameReader(64 * 1024 * 1024);
    const buf = new Uint8Array(256 * 1024);
    loop: for (;;) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) break;
      const frames = reader.push(buf.subarray(0, n));
      if (frames === null) throw new CtxError("EPROTO", "the terminal sent an oversized frame");
      for (const f of frames) {
        if (f.type === FRAME.hello) {
          const h = frameJson(helloFrame, f);
          if (o.id !== undefined && h.id !== o.id) {
            throw new CtxError(
              "ENXIO",
              `terminal "${o.id}" is not live (this socket serves "${h.id}")`,
              { path: o.socket },
            );
          }
          note(
            `[${
              o.mode === "attach" ? "attached to" : "watching"
            } ${h.id} (${h.rows}x${h.cols}); detach: Ctrl+]]`,
          );
        } else if (f.type === FRAME.snapshot) {
          out(CLEAR);
          out(f.payload);
        } else if (f.type === FRAME.output) out(f.payload);
        else if (f.type === FRAME.exit) {
          const x = frameJson(exitFrame, f);
          result = x.exit_code;
          exited = true;
          out(RESTORE);
          note(`[the terminal's program exited with code ${x.exit_code}]`);
          break loop;
        } else if (f.type === FRAME.error) {
          const e = frameJson(errorFrame, f);
          const code = isErrno(e.code) ? e.code : "EIO";
          throw new CtxError(code, e.message, { path: o.socket });
        }
      }
    }
    if (result === undefined) result = 0;
    if (raw) out(RESTORE);
    void keys;
    return result;
  } finally {
    if (winch) Deno.removeSignalListener("SIGWINCH", winch);
    if (raw) {
      try {
        Deno.stdin.setRaw(false);
      } catch {
        /* any kind: a finally, maybe while an error is on its way out; stdin may be gone */
      }
    }
    if (!exited) note(`[detached]`);
    try {
      conn.close();
    } catch (e) {
      ignore(e, Deno.errors.BadResource); /* closed */
    }
    try {
      stdinReader?.releaseLock();
    } catch (e) {
      ignore(e, TypeError); /* a read is pending: the caller exits */
    }
  }
}
