/** tsh's line editor on a terminal: raw-mode key handling, cursor motion and history, with no node:readline (whose TTY reads stall inside a bwrap sandbox). */

const enc = new TextEncoder();

/** Where the editor reads keys and writes its echo (Deno.stdin/stdout; tests pass fakes). */
export interface Tty {
  read(buf: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): void;
  setRaw(raw: boolean): void;
}

/** The process's terminal. */
export const denoTty: Tty = {
  read: (b) => Deno.stdin.read(b),
  write: (b) => {
    for (let off = 0; off < b.length;) off += Deno.stdout.writeSync(b.subarray(off));
  },
  setRaw: (raw) => Deno.stdin.setRaw(raw),
};

/**
 * Reads lines with editing: printable text inserted at the cursor, Backspace/Delete, Left/Right,
 * Home/End (Ctrl+A/Ctrl+E), Ctrl+U/Ctrl+K (cut to start/end), Up/Down through the history,
 * Ctrl+C (drop the line), Ctrl+D (end of input on an empty line). The terminal is raw only
 * while a line is being read.
 */
/** The line being edited: its characters, the cursor, the history position and the draft it left. */
interface Edit {
  chars: string[];
  cur: number;
  hist: number;
  draft: string[];
}

export class LineEditor {
  #pending = "";
  #dec = new TextDecoder();
  #history: string[];
  constructor(readonly tty: Tty, options: { history?: string[] } = {}) {
    this.#history = [...(options.history ?? [])];
  }

  /** Records a line in the in-memory history (newest last). */
  remember(line: string): void {
    if (line.trim() !== "" && this.#history.at(-1) !== line) this.#history.push(line);
  }

  /** Reads one line after printing `prompt`; null at end of input. */
  async readLine(prompt: string): Promise<string | null> {
    const e: Edit = { chars: [], cur: 0, hist: this.#history.length, draft: [] };
    const draw = () => {
      const back = e.chars.length - e.cur;
      this.tty.write(
        enc.encode(`\r${prompt}${e.chars.join("")}\x1b[K${back > 0 ? `\x1b[${back}D` : ""}`),
      );
    };
    this.tty.setRaw(true);
    try {
      draw();
      const buf = new Uint8Array(4096);
      for (;;) {
        while (this.#pending.length) {
          const s = this.#pending;
          let used = 1;
          const c = s[0];
          if (c === "\x1b") {
            const m = /^(\[[0-9;]*[A-Za-z~]|O[A-Za-z])/.exec(s.slice(1));
            if (!m) {
              if (s.length < 6 && /^(\[[0-9;]*|O)?$/.test(s.slice(1))) break; // the rest is coming
              used = 1; // a lone ESC: ignored
            } else {
              used = m[0].length + 1;
              this.#key(m[1], e);
            }
          } else if (c === "\r" || c === "\n") {
            this.#pending = s.slice(s[0] === "\r" && s[1] === "\n" ? 2 : 1);
            e.cur = e.chars.length;
            draw();
            this.tty.write(enc.encode("\r\n"));
            return e.chars.join("");
          } else if (c === "\x7f" || c === "\b") {
            if (e.cur > 0) e.chars.splice(--e.cur, 1);
          } else if (c === "\x03") {
            this.tty.write(enc.encode("^C\r\n"));
            e.chars = [];
            e.cur = 0;
          } else if (c === "\x04") {
            if (e.chars.length === 0) {
              this.#pending = s.slice(1);
              this.tty.write(enc.encode("\r\n"));
              return null;
            }
            e.chars.splice(e.cur, 1);
          } else if (c === "\x01") e.cur = 0;
          else if (c === "\x05") e.cur = e.chars.length;
          else if (c === "\x15") {
            e.chars.splice(0, e.cur);
            e.cur = 0;
          } else if (c === "\x0b") e.chars.splice(e.cur);
          else if (c >= " ") {
            const ch = String.fromCodePoint(s.codePointAt(0)!); // s is non-empty here
            used = ch.length;
            e.chars.splice(e.cur++, 0, ch);
          }
          this.#pending = s.slice(used);
        }
        draw();
        const n = await this.tty.read(buf);
        if (n === null) return null;
        this.#pending += this.#dec.decode(buf.subarray(0, n), { stream: true });
      }
    } finally {
      this.tty.setRaw(false);
    }
  }

  /** An escape sequence's key (`[D`, `OA`, ...): cursor moves, delete, history up and down. */
  #key(k: string, e: Edit): void {
    if (k === "[D" || k === "OD") e.cur = Math.max(0, e.cur - 1);
    else if (k === "[C" || k === "OC") e.cur = Math.min(e.chars.length, e.cur + 1);
    else if (k === "[H" || k === "OH" || k === "[1~") e.cur = 0;
    else if (k === "[F" || k === "OF" || k === "[4~") e.cur = e.chars.length;
    else if (k === "[3~") e.chars.splice(e.cur, 1);
    else if ((k === "[A" || k === "OA") && e.hist > 0) {
      if (e.hist === this.#history.length) e.draft = e.chars;
      e.chars = [...this.#history[--e.hist]];
      e.cur = e.chars.length;
    } else if ((k === "[B" || k === "OB") && e.hist < this.#history.length) {
      e.hist++;
      e.chars = e.hist === this.#history.length ? e.draft : [...this.#history[e.hist]];
      e.cur = e.chars.length;
    }
  }
}
