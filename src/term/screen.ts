/** The headless VT model of one terminal: fed every output byte, it answers the current screen as escape sequences for late joiners. */
// The ES module files by path, the same for `deno run` and `deno bundle` (the built single file):
// @xterm/headless 6.0.0's `module` field names lib/xterm.mjs, which the package does not ship, so
// the bundler cannot resolve the bare name; and `deno run` would load the CommonJS `main` instead.
import * as xterm from "@xterm/headless/lib-headless/xterm-headless.mjs";
import * as serialize from "@xterm/addon-serialize/lib/addon-serialize.mjs";

/** Bytes fed but not yet parsed above which the reader should wait ({@link Screen.idle}). */
export const HIGH_WATER = 4 * 1024 * 1024;

type Term = {
  write(data: Uint8Array | string, cb?: () => void): void;
  _core?: { writeSync?(data: Uint8Array | string): void };
  resize(cols: number, rows: number): void;
  loadAddon(a: unknown): void;
  dispose(): void;
};
type Serializer = { serialize(o?: { scrollback?: number }): string };

/**
 * xterm.js (headless) plus its serialize addon. Output is parsed synchronously through the core's
 * `writeSync` (present in the pinned 6.0.0; nothing here registers the async parser hooks that make
 * it "unreliable"): the public `write` queues each chunk behind a `setTimeout(0)`, which costs
 * about 2.6 ms on this Deno, several times the parse itself. Without `writeSync` (another
 * version), writes are queued, and every operation that must see "all output so far" (a resize,
 * a snapshot) is queued behind them; either way a snapshot is exactly the screen at one position
 * of the output stream.
 */
export class Screen {
  #term: Term;
  #ser: Serializer;
  #pending = 0;
  #waiters: (() => void)[] = [];
  #sync: ((data: Uint8Array) => void) | undefined;

  constructor(size: { rows: number; cols: number }, options: { scrollback?: number } = {}) {
    const T = (xterm as unknown as { Terminal: new (o: unknown) => Term }).Terminal;
    this.#term = new T({
      rows: size.rows,
      cols: size.cols,
      scrollback: options.scrollback ?? 200,
      allowProposedApi: true,
      logLevel: "off", // writeSync's deprecation notice would land in ctxterm's log
    });
    const core = this.#term._core;
    if (typeof core?.writeSync === "function") this.#sync = (d) => core.writeSync!(d); // checked
    const S = (serialize as unknown as { SerializeAddon: new () => Serializer }).SerializeAddon;
    this.#ser = new S();
    this.#term.loadAddon(this.#ser);
  }

  /** Bytes fed and not yet parsed. */
  get backlog(): number {
    return this.#pending;
  }

  /** Feeds output bytes (the model keeps them until parsed: do not reuse the buffer). */
  feed(bytes: Uint8Array): void {
    if (this.#sync) return this.#sync(bytes);
    this.#pending += bytes.length;
    this.#term.write(bytes, () => {
      this.#pending -= bytes.length;
      if (this.#pending < HIGH_WATER / 2) { for (const w of this.#waiters.splice(0)) w(); }
    });
  }

  /** Resolves once the backlog is below half the high-water mark. */
  idle(): Promise<void> {
    if (this.#pending < HIGH_WATER / 2) return Promise.resolve();
    return new Promise((r) => this.#waiters.push(r));
  }

  /** Resizes the model after every byte fed so far (the PTY was resized at this point). */
  resize(size: { rows: number; cols: number }): void {
    if (this.#sync) return this.#term.resize(size.cols, size.rows);
    this.#term.write(new Uint8Array(0), () => this.#term.resize(size.cols, size.rows));
  }

  /**
   * The screen at this point of the stream as escape sequences: the normal buffer (with up to
   * `scrollback` lines above it), the alternate screen when active, modes, cursor.
   */
  snapshot(options: { scrollback?: number } = {}): Promise<string> {
    const scrollback = options.scrollback ?? 0;
    if (this.#sync) return Promise.resolve(this.#ser.serialize({ scrollback }));
    return new Promise((resolve) => {
      this.#term.write(
        new Uint8Array(0),
        () => resolve(this.#ser.serialize({ scrollback })),
      );
    });
  }

  /** Frees the model. */
  dispose(): void {
    this.#term.dispose();
  }
}
