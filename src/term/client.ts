/** The watch/attach client of a terminal socket on the local tty: raw mode (always restored), detach key, window size, snapshot then live output. */
import { CtxError, isErrno } from "../abi/errno.ts";
import { type ClientMode, encodeFrame, FRAME, FrameReader, sizePayload } from "../abi/terminal.ts";

/** The detach key: Ctrl+] (0x1d), as telnet's escape. Watchers may also leave with Ctrl+C. */
export const DETACH_KEY = 0x1d;
const CTRL_C = 0x03;

/** Resets what a program may have left set on the local terminal, and leaves the alternate screen. */
export const RESTORE = "\x1b[?1049l\x1b[0m\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l" +
  "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l";
/** Written before a snapshot: the local screen starts blank, in the normal buffer, default attributes. */
const CLEAR = "\x1b[?1049l\x1b[0m\x1b[H\x1b[2J\x1b[3J";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Options for {@link join}. */
export interface JoinOptions {
  socket: string;
  mode: ClientMode;
  /** The terminal id expected on this socket (an error when another terminal answers). */
  id?: string;
  /** Print status lines (`[attached ...]`) to stderr; default true. */
  quiet?: boolean;
}

/** Connects to a terminal socket; ENOENT / ECONNREFUSED / EACCES as the kernel says. */
export async function connect(path: string): Promise<Deno.UnixConn> {
  try {
    return await Deno.connect({ transport: "unix", path });
  } catch (e) {
    const code = (e as { code?: string }).code ?? "";
    const errno = isErrno(code)
      ? code
      : e instanceof Deno.errors.NotFound
      ? "ENOENT"
      : "ECONNREFUSED";
    throw new CtxError(errno, `cannot connect to the terminal socket`, { path });
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
  const conn = await connect(o.socket);
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
      } catch { /* not a terminal */ }
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
      } catch { /* closed */ }
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
          const h = JSON.parse(dec.decode(f.payload)) as { id: string; rows: number; cols: number };
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
          const x = JSON.parse(dec.decode(f.payload)) as { exit_code: number };
          result = x.exit_code;
          exited = true;
          out(RESTORE);
          note(`[the terminal's program exited with code ${x.exit_code}]`);
          break loop;
        } else if (f.type === FRAME.error) {
          const e = JSON.parse(dec.decode(f.payload)) as { code: string; message: string };
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
      } catch { /* stdin gone */ }
    }
    if (!exited) note(`[detached]`);
    try {
      conn.close();
    } catch { /* closed */ }
    try {
      stdinReader?.releaseLock();
    } catch { /* a read is pending: the caller exits */ }
  }
}
