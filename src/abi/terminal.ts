/** The terminal ABI: resource metadata, events.jsonl records, and the ctxterm socket protocol (mode line + typed frames). */
import { z } from "zod";
import { CtxError } from "./errno.ts";

/** Terminal states written to `state` (and its alias `status`). */
export const TERMINAL_STATES = ["created", "running", "exited", "error"] as const;
/** A terminal state. */
export type TerminalState = typeof TERMINAL_STATES[number];

/** A terminal id: one path component, same grammar as object names. */
export const TERMINAL_ID = /^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}$/;

/** `meta.json` of a terminal resource (replaced atomically on every state change). */
export const terminalMeta = z.object({
  id: z.string().regex(TERMINAL_ID),
  agent: z.string(),
  session: z.string(),
  /** The owner uid, as text (the reference's shape). */
  owner: z.string().regex(/^[0-9]+$/),
  cwd: z.string(),
  command: z.array(z.string()),
  state: z.enum(TERMINAL_STATES),
  /** The live socket's path (the real one, not the alias). */
  socket: z.string(),
  created_at: z.number(),
  /** ctxterm's pid while it runs. */
  pid: z.number().int().optional(),
  /** The program's pid on the PTY. */
  child: z.number().int().optional(),
  rows: z.number().int().optional(),
  cols: z.number().int().optional(),
  exit_code: z.number().int().optional(),
  signal: z.number().int().nullable().optional(),
  ended_at: z.number().optional(),
  error: z.string().optional(),
});
/** Decoded `meta.json`. */
export type TerminalMeta = z.infer<typeof terminalMeta>;

const base = { seq: z.number().int().positive(), ts: z.number() };
/** Which kind of client a connection is. */
export const clientMode = z.enum(["watch", "attach"]);
/** `watch` (read-only) or `attach` (read-write). */
export type ClientMode = z.infer<typeof clientMode>;

/** One record of a terminal's `events.jsonl` (`ts`: unix seconds, millisecond fraction). */
export const terminalEvent = z.discriminatedUnion("type", [
  z.object({
    ...base,
    type: z.literal("terminal.start"),
    command: z.array(z.string()),
    rows: z.number().int(),
    cols: z.number().int(),
    pid: z.number().int(),
  }),
  z.object({ ...base, type: z.literal("pty.output"), data_b64: z.string() }),
  z.object({
    ...base,
    type: z.literal("pty.resize"),
    rows: z.number().int(),
    cols: z.number().int(),
    uid: z.number().int().optional(),
  }),
  z.object({
    ...base,
    type: z.literal("client.attach"),
    client: z.number().int(),
    mode: clientMode,
    uid: z.number().int(),
    pid: z.number().int(),
  }),
  z.object({
    ...base,
    type: z.literal("client.detach"),
    client: z.number().int(),
    mode: clientMode,
    reason: z.string(),
    /** Input frames a watcher sent that were dropped (never reached the PTY). */
    dropped_input: z.number().int().optional(),
  }),
  z.object({
    ...base,
    type: z.literal("process.exit"),
    exit_code: z.number().int(),
    signal: z.number().int().nullable(),
    reason: z.string().optional(),
  }),
]);
/** A decoded terminal event. */
export type TerminalEvent = z.infer<typeof terminalEvent>;

/** Largest `pty.output` chunk in one event (raw bytes, before base64). */
export const MAX_OUTPUT_CHUNK = 32 * 1024;

/**
 * Parses a terminal's events.jsonl. Every whole line must be a valid event with a seq above the
 * previous one (else EIO via the thrown message); a last line without its newline is a record cut
 * by a crash mid-write (kill -9 can interrupt a large write(2)): it is left out and reported as
 * `torn`, never guessed at.
 */
export function parseTerminalEvents(text: string): { events: TerminalEvent[]; torn: boolean } {
  const end = text.lastIndexOf("\n");
  const torn = end !== text.length - 1;
  const body = end < 0 ? "" : text.slice(0, end);
  const events: TerminalEvent[] = [];
  let seq = 0;
  if (body !== "" || end === 0) {
    body.split("\n").forEach((line, i) => {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        throw new Error(`line ${i + 1} is not JSON`);
      }
      const r = terminalEvent.safeParse(v);
      if (!r.success) throw new Error(`line ${i + 1} is not a terminal event`);
      if (r.data.seq <= seq) throw new Error(`line ${i + 1}: seq ${r.data.seq} after ${seq}`);
      seq = r.data.seq;
      events.push(r.data);
    });
  }
  return { events, torn };
}

// ---- the ctxterm socket protocol (spec/terminal.md) ----

/** The first line a client sends: its mode, at most this many bytes with the newline. */
export const MAX_MODE_LINE = 16;
/** Largest frame payload either side accepts. */
export const MAX_PAYLOAD = 1024 * 1024;
/** Frame header: one type byte and a big-endian u32 payload length. */
export const HEADER = 5;

/** Frame types, one ASCII letter each. Client to server: i r d. Server to client: h s o z x e. */
export const FRAME = {
  /** client: input bytes for the PTY (attach only; a watcher's are dropped by the server) */
  input: 0x69, // i
  /** client: its window size, rows u16 + cols u16 (attach only) */
  resize: 0x72, // r
  /** client: leaving (same as closing the socket) */
  detach: 0x64, // d
  /** server: JSON hello {id, mode, rows, cols, pid} */
  hello: 0x68, // h
  /** server: the current screen as escape sequences, sent once before any output */
  snapshot: 0x73, // s
  /** server: PTY output bytes */
  output: 0x6f, // o
  /** server: the PTY's window size changed, rows u16 + cols u16 */
  size: 0x7a, // z
  /** server: JSON {exit_code, signal}: the program ended, the connection closes next */
  exit: 0x78, // x
  /** server: JSON {code, message}: refused or dropped, the connection closes next */
  error: 0x65, // e
} as const;

/** ctxterm's one `--ready` line on stdout, once its socket listens. */
export const readyLine = z.strictObject({
  ready: z.literal(true),
  socket: z.string(),
  pid: z.number().int().positive(),
  child: z.number().int().positive(),
});

/** The `h` frame's JSON: who the connection reached (spec/terminal.md "Socket"). */
export const helloFrame = z.strictObject({
  id: z.string().regex(TERMINAL_ID),
  mode: clientMode,
  client: z.number().int(),
  rows: z.number().int(),
  cols: z.number().int(),
  pid: z.number().int(),
  agent: z.string(),
  session: z.string(),
});
/** The `x` frame's JSON: how the program ended. */
export const exitFrame = z.strictObject({
  exit_code: z.number().int(),
  signal: z.number().int().nullable(),
});
/** The `e` frame's JSON: why the server refused or dropped the client. */
export const errorFrame = z.strictObject({ code: z.string(), message: z.string() });

/** The JSON payload of server frame `f` as `schema` has it; EPROTO for anything else. */
export function frameJson<T>(schema: z.ZodType<T>, f: { type: number; payload: Uint8Array }): T {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(f.payload));
  } catch { /* refused below */ }
  const r = schema.safeParse(v);
  if (!r.success) {
    throw new CtxError(
      "EPROTO",
      `the terminal sent a malformed "${String.fromCharCode(f.type)}" frame`,
    );
  }
  return r.data;
}

/** Encodes one frame. */
export function encodeFrame(type: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(HEADER + payload.length);
  out[0] = type;
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, HEADER);
  return out;
}

/** Encodes a JSON frame. */
export function jsonFrame(type: number, value: unknown): Uint8Array {
  return encodeFrame(type, new TextEncoder().encode(JSON.stringify(value)));
}

/** Encodes a size (rows, cols) payload. */
export function sizePayload(rows: number, cols: number): Uint8Array {
  const b = new Uint8Array(4);
  const v = new DataView(b.buffer);
  v.setUint16(0, rows);
  v.setUint16(2, cols);
  return b;
}

/**
 * The largest window a client may set: the VT model keeps rows x cols cells (about 17 bytes each),
 * so an unbounded resize from any attacher grows the (maybe root) ctxterm without limit.
 */
export const MAX_ROWS = 500;
export const MAX_COLS = 1000;

/**
 * Decodes a size payload; null when it is not 4 bytes of two non-zero u16s. Each dimension is
 * clamped to {@link MAX_ROWS} / {@link MAX_COLS} (a bigger window shows the top-left part).
 */
export function parseSize(p: Uint8Array): { rows: number; cols: number } | null {
  if (p.length !== 4) return null;
  const v = new DataView(p.buffer, p.byteOffset, 4);
  const rows = v.getUint16(0), cols = v.getUint16(2);
  if (rows === 0 || cols === 0) return null;
  return { rows: Math.min(rows, MAX_ROWS), cols: Math.min(cols, MAX_COLS) };
}

/**
 * Splits a byte stream into frames. `push` returns complete frames; an oversized length makes
 * `push` return null (the peer is broken or hostile: drop it).
 */
export class FrameReader {
  #buf = new Uint8Array(0);
  constructor(readonly max = MAX_PAYLOAD) {}

  /** Adds bytes; the frames now complete, or null on an oversized frame. */
  push(chunk: Uint8Array): { type: number; payload: Uint8Array }[] | null {
    let buf = chunk;
    if (this.#buf.length) {
      buf = new Uint8Array(this.#buf.length + chunk.length);
      buf.set(this.#buf);
      buf.set(chunk, this.#buf.length);
    }
    const out: { type: number; payload: Uint8Array }[] = [];
    let off = 0;
    while (buf.length - off >= HEADER) {
      const len = new DataView(buf.buffer, buf.byteOffset + off + 1, 4).getUint32(0);
      if (len > this.max) return null;
      if (buf.length - off < HEADER + len) break;
      out.push({ type: buf[off], payload: buf.slice(off + HEADER, off + HEADER + len) });
      off += HEADER + len;
    }
    this.#buf = buf.slice(off);
    return out;
  }
}
