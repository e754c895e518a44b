/** Terminal test fixtures: a real ctxterm process, tmux panes running real clients, a raw protocol client. */
import { encodeFrame, FRAME, FrameReader, parseTerminalEvents } from "../../src/abi/terminal.ts";
import type { TerminalEvent } from "../../src/abi/terminal.ts";
import { Tmux } from "../runtime/tmux.ts";

/** The checkout root. */
export const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
/** The pinned deno. */
export const DENO = `${REPO}/tools/deno`;
/** ctxterm as a command line. */
export const CTXTERM = [DENO, "run", "-A", `${REPO}/cli/ctxterm.ts`];
/** ctx as a command line. */
export const CTX = [DENO, "run", "-A", `${REPO}/cli/ctx.ts`];

/** A bash with a fixed prompt and no rc files: what the screen tests type into. */
export const BASH = ["/usr/bin/env", "PS1=$ ", "/bin/bash", "--norc", "--noprofile", "-i"];

/** A running ctxterm. */
export interface Term {
  dir: string;
  socket: string;
  record: string;
  child: Deno.ChildProcess;
  pid: number;
  /** The program's pid on the PTY. */
  program: number;
  /** ctxterm's exit status (resolves once it is gone). */
  status: Promise<Deno.CommandStatus>;
  /** Its stderr so far (for failure messages). */
  stderr(): string;
}

/** Starts ctxterm on `cmd` in a fresh temp dir and waits for its ready line. */
export async function startTerm(
  cmd: string[] = BASH,
  options: { size?: string; env?: Record<string, string>; record?: boolean } = {},
): Promise<Term> {
  const dir = await Deno.makeTempDir({ prefix: "ctx-term-" });
  const socket = `${dir}/run/main.sock`;
  const record = `${dir}/session/terminal/t1`;
  const child = new Deno.Command(CTXTERM[0], {
    args: [
      ...CTXTERM.slice(1),
      "--listen",
      socket,
      ...(options.record ?? true ? ["--record", record] : []),
      "--size",
      options.size ?? "24x80",
      "--ready",
      "--",
      ...cmd,
    ],
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let err = "";
  const errDone = (async () => {
    for await (const c of child.stderr.pipeThrough(new TextDecoderStream())) err += c;
  })();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("\n")) {
    const r = await reader.read();
    if (r.done) throw new Error(`ctxterm did not start: ${err}`);
    out += r.value;
  }
  void (async () => {
    for (;;) if ((await reader.read()).done) break;
  })();
  const ready = JSON.parse(out.split("\n")[0]) as { pid: number; child: number };
  const status = child.status.then(async (s) => {
    await errDone;
    return s;
  });
  return {
    dir,
    socket,
    record,
    child,
    pid: ready.pid,
    program: ready.child,
    status,
    stderr: () => err,
  };
}

/** Ends a terminal (SIGTERM unless already gone) and removes its temp dir. */
export async function stopTerm(t: Term): Promise<void> {
  try {
    t.child.kill("SIGTERM");
  } catch { /* gone */ }
  await t.status;
  await Deno.remove(t.dir, { recursive: true }).catch(() => {});
}

/** The recorded events (whole lines; a torn last line flagged). */
export function events(t: { record: string }): { events: TerminalEvent[]; torn: boolean } {
  return parseTerminalEvents(Deno.readTextFileSync(`${t.record}/events.jsonl`));
}

/** The recorded output, decoded. */
export function recordedOutput(t: { record: string }): string {
  return events(t).events.filter((e) => e.type === "pty.output").map((e) =>
    atob((e as { data_b64: string }).data_b64)
  ).join("");
}

/** One tmux server with one window `t` of `cols`x`rows`, running `cmd`. */
export async function pane(
  dir: string,
  name: string,
  cmd: string[],
  size: { cols: number; rows: number } = { cols: 80, rows: 24 },
): Promise<Tmux> {
  const tm = new Tmux(`${dir}/tmux-${name}.sock`);
  const line = cmd.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(" ");
  const r = await tm.run(
    "-f",
    "/dev/null",
    "new-session",
    "-d",
    "-s",
    "t",
    "-x",
    String(size.cols),
    "-y",
    String(size.rows),
    // The pane stays after its command ends, so its last screen can still be read.
    `${line}; echo "[client exit $?]"; sleep 600`,
  );
  if (r.code !== 0) throw new Error(`tmux new-session failed`);
  return tm;
}

/** Ends a tmux server. */
export async function closePane(tm: Tmux): Promise<void> {
  await tm.run("kill-server");
}

/** Polls `pred` (an event, not a duration) until it holds; fails after `ms` with `what`. */
export async function until(pred: () => boolean, what: string, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A raw protocol client: sends the mode line, collects frames. */
export class RawClient {
  frames: { type: number; payload: Uint8Array }[] = [];
  closed = false;
  /** Output bytes received, and the last 4096 characters of it. */
  received = 0;
  tail = "";
  /** Keep output frames in `frames` (false for floods: only `received` and `tail`). */
  keepOutput = true;
  /** Called with each output frame's text as it arrives. */
  onOutput?: (text: string) => void;
  #dec = new TextDecoder();
  #reader = new FrameReader(64 * 1024 * 1024);
  private constructor(readonly conn: Deno.UnixConn) {}

  /** Connects and sends `mode` as the first line (anything, to test refusals). */
  static async open(socket: string, mode: string, options: { read?: boolean } = {}) {
    const conn = await Deno.connect({ transport: "unix", path: socket });
    const c = new RawClient(conn);
    await conn.write(new TextEncoder().encode(`${mode}\n`));
    if (options.read ?? true) c.#pump();
    return c;
  }

  async #pump() {
    const buf = new Uint8Array(1 << 20);
    for (;;) {
      const n = await this.conn.read(buf).catch(() => null);
      if (n === null) break;
      for (const f of this.#reader.push(buf.slice(0, n)) ?? []) {
        if (f.type === FRAME.output) {
          this.received += f.payload.length;
          const text = this.#dec.decode(f.payload);
          this.tail = (this.tail + text).slice(-4096);
          this.onOutput?.(text);
          if (!this.keepOutput) continue;
        }
        this.frames.push(f);
      }
    }
    this.closed = true;
    this.close();
  }

  /** Sends one frame. */
  async send(type: number, payload: Uint8Array = new Uint8Array(0)) {
    await this.conn.write(encodeFrame(type, payload));
  }

  /** Sends input bytes. */
  input(text: string) {
    return this.send(FRAME.input, new TextEncoder().encode(text));
  }

  /** The concatenated output frames as text. */
  output(): string {
    const dec = new TextDecoder();
    return this.frames.filter((f) => f.type === FRAME.output).map((f) => dec.decode(f.payload))
      .join("");
  }

  /** Frames of a type. */
  of(type: number) {
    return this.frames.filter((f) => f.type === type);
  }

  close() {
    try {
      this.conn.close();
    } catch { /* closed */ }
  }
}

export { Tmux };
