/** One client connection: bounded JSONL reading, backpressured writes, and the approval hand-off. */
import type { Socket } from "node:net";
import { encodeFrame, MAX_FRAME, type ServerFrame } from "../abi/frames.ts";
import type { PeerCred } from "../sys/sock.ts";
import { close, peerGone } from "../sys/libc.ts";
import { fdOf } from "../sys/sock.ts";
import { ignore } from "../abi/errno.ts";

/** A raw line read while an approval waits, or why none came. */
export type Answer = { line: string } | { eof: true } | { timeout: true } | { oversized: true };

/** Wraps a node:net socket; lines are handed to `onLine`, oversized ones to `onOversized`. */
export class Conn {
  readonly socket: Socket;
  readonly peer: PeerCred;
  /**
   * The directory the peer runs in, held open (O_PATH, opened through `/proc/<pid>/cwd` at
   * accept): the peer's own cwd in its own view, never a path from a frame or re-resolved here.
   * Closed with the connection; a run that outlives it holds its own duplicate.
   */
  readonly workspace: { fd: number };
  closed = false;
  #buf: Uint8Array[] = [];
  #len = 0;
  #skipping = false;
  #waiter?: (a: Answer) => void;
  #closeHooks: (() => void)[] = [];
  #drain?: Promise<void>;

  constructor(socket: Socket, peer: PeerCred, workspace: { fd: number }) {
    this.socket = socket;
    this.peer = peer;
    this.workspace = workspace;
    socket.on("close", () => {
      this.closed = true;
      close(workspace.fd);
      this.#waiter?.({ eof: true });
      this.#waiter = undefined;
      for (const h of this.#closeHooks) h();
    });
    socket.on("end", () => this.#waiter?.({ eof: true }));
    socket.on("error", () => {/* close follows */});
  }

  /**
   * True when the client is gone: closed here, or its end closed entirely (not a half-close, after
   * which it still reads its replies). Asked before a queued request starts, since the 'close'
   * event of a peer that left comes only once a write to it fails.
   */
  get gone(): boolean {
    if (this.closed || this.socket.destroyed) return true;
    // Asked of the kernel, not of the stream: its EOF may not have been read yet.
    try {
      return peerGone(fdOf(this.socket));
    } catch (e) {
      ignore(e, "ENOTSUP");
      return true;
    }
  }

  /** Runs `fn` once when the connection closes. */
  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.#closeHooks.push(fn);
  }

  /** Starts reading; each complete line (without its newline) goes to `onLine`. */
  read(onLine: (line: Uint8Array) => void, onOversized: () => void): void {
    this.socket.on("data", (chunk: Uint8Array) => {
      let start = 0;
      for (let i = 0; i < chunk.length; i++) {
        if (chunk[i] !== 0x0a) continue;
        const part = chunk.subarray(start, i);
        start = i + 1;
        if (this.#skipping) {
          this.#skipping = false;
          this.#reset();
          continue;
        }
        if (this.#len + part.length + 1 > MAX_FRAME) {
          this.#reset();
          this.#dispatchOversized(onOversized);
          continue;
        }
        this.#buf.push(part);
        this.#len += part.length;
        const line = this.#take();
        this.#dispatch(line, onLine);
      }
      const rest = chunk.subarray(start);
      if (rest.length === 0 || this.#skipping) return;
      if (this.#len + rest.length + 1 > MAX_FRAME) {
        // Drop bytes until the next newline instead of buffering without bound.
        this.#reset();
        this.#skipping = true;
        this.#dispatchOversized(onOversized);
        return;
      }
      this.#buf.push(rest.slice());
      this.#len += rest.length;
    });
    // Output backpressure reaches input: a peer that stops reading its replies stops being read
    // (every line it sends could produce more output waiting in memory here).
    this.socket.on("data", () => {
      if (this.socket.writableLength <= MAX_FRAME || this.socket.isPaused()) return;
      this.socket.pause();
      const go = () => {
        this.socket.off("drain", go);
        if (!this.socket.destroyed) this.socket.resume();
      };
      this.socket.on("drain", go);
    });
  }

  #reset(): void {
    this.#buf = [];
    this.#len = 0;
  }

  #take(): Uint8Array {
    const out = new Uint8Array(this.#len);
    let off = 0;
    for (const b of this.#buf) {
      out.set(b, off);
      off += b.length;
    }
    this.#reset();
    return out;
  }

  #dispatch(line: Uint8Array, onLine: (line: Uint8Array) => void): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w({ line: new TextDecoder().decode(line) });
    } else onLine(line);
  }

  #dispatchOversized(onOversized: () => void): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w({ oversized: true });
    } else onOversized();
  }

  /** Takes the very next line on this connection (the approval answer), with a timeout. */
  nextLine(timeoutMs: number): Promise<Answer> {
    if (this.closed || this.socket.readableEnded) return Promise.resolve({ eof: true });
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#waiter = undefined;
        resolve({ timeout: true });
      }, timeoutMs);
      this.#waiter = (a) => {
        clearTimeout(t);
        resolve(a);
      };
    });
  }

  /** Writes one frame; waits for drain when the peer reads slowly (no unbounded buffering). */
  async send(frame: ServerFrame): Promise<void> {
    if (this.closed || this.socket.destroyed || !this.socket.writable) return;
    if (!this.socket.write(encodeFrame(frame))) {
      // One shared waiter per congestion, however many writers are waiting on it.
      this.#drain ??= new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off("drain", done);
          this.socket.off("close", done);
          this.#drain = undefined;
          resolve();
        };
        this.socket.on("drain", done);
        this.socket.on("close", done);
      });
      await this.#drain;
    }
  }

  /** Sends a last frame and closes the write side. */
  async end(frame?: ServerFrame): Promise<void> {
    if (frame !== undefined) await this.send(frame);
    this.socket.end();
  }
}
