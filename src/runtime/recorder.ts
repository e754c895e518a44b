/** One run's recorder: the only writer of its frames; everything goes to events.jsonl, then to clients. */
import {
  encodeFrame,
  fitFrame,
  type Frame,
  MAX_DELTA,
  MAX_FRAME,
  type RunStatus,
  splitText,
} from "../abi/frames.ts";
import type { RunIndex } from "../store/runs.ts";
import { appendEvent, appendMessage, type SessionRef, setState } from "../store/session.ts";
import type { Conn } from "./conn.ts";

// Frames as emitted by run code: the recorder stamps `run` itself.
type Unstamped<F> = F extends { run?: string } ? Omit<F, "run"> : never;
/** A frame before the recorder stamps its run id. */
export type RunFrame = Unstamped<Frame>;

/** Generates a run id: `ctx-` + 32 lowercase hex digits from the CSPRNG. */
export function newRunId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return "ctx-" + [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** A live run: append-then-stream, and nothing at all after `done`. */
export class Run {
  readonly id: string;
  readonly ref: SessionRef;
  readonly index: RunIndex;
  readonly abort = new AbortController();
  readonly subscribers = new Set<Conn>();
  /** The connection that started the run (approval answers come from it). */
  readonly origin: Conn;
  status?: RunStatus;
  readonly #onEnd?: () => void;
  #finished: Promise<RunStatus>;
  #active = false;
  #resolve!: (s: RunStatus) => void;

  constructor(
    options: {
      id: string;
      ref: SessionRef;
      index: RunIndex;
      origin: Conn;
      /**
       * Called once the run's end is recorded and before `done` goes out: what a client reads
       * after seeing `done` (the agent's `status`) already says the run ended.
       */
      onEnd?: () => void;
    },
  ) {
    this.id = options.id;
    this.#onEnd = options.onEnd;
    this.ref = options.ref;
    this.index = options.index;
    this.origin = options.origin;
    this.subscribers.add(options.origin);
    this.#finished = new Promise((r) => this.#resolve = r);
  }

  /** True once `done` is recorded (ok, error or cancelled). */
  get finished(): boolean {
    return this.status !== undefined;
  }

  /** Resolves with the final status. */
  wait(): Promise<RunStatus> {
    return this.#finished;
  }

  /** Records a frame durably, then streams it; dropped once the run is finished. */
  async emit(frame: RunFrame): Promise<void> {
    if (this.finished) return;
    // Frames are at most 1 MiB either way: long output streams as several deltas, and an
    // assistant message too long for one frame is cut here and marked `truncated`; the whole
    // text stays in messages.jsonl (the durable history), which never goes over the wire whole.
    if (frame.type === "delta" && frame.text.length > MAX_DELTA / 4) {
      const parts = splitText(frame.text, MAX_DELTA);
      if (parts.length > 1) {
        for (const text of parts) await this.emit({ type: "delta", text });
        return;
      }
    }
    if (
      frame.type === "message" && frame.role === "assistant" &&
      new TextEncoder().encode(encodeFrame(frame)).length + 64 > MAX_FRAME
    ) {
      const text = frame.content.map((p) => p.text).join("");
      frame = fitFrame(text, (t, cut) => ({
        type: "message",
        run: this.id,
        role: "assistant",
        content: [{ type: "text", text: t }],
        ...(cut ? { truncated: true as const } : {}),
      }));
      delete (frame as { run?: string }).run; // stamped below; counted above for the bound
    }
    const { type, ...rest } = frame;
    const stamped = { type, run: this.id, ...rest } as Frame; // run right after type: easy to grep
    appendEvent(this.ref, stamped);
    if (stamped.type === "tool_call") this.index.call(this.id);
    await this.#broadcast(stamped);
  }

  /**
   * Sets the session `state` to `active` once (idempotent; nothing once finished). Executable
   * runs call it right after spawning the agent, so the two fsynced writes overlap the agent's
   * exec instead of delaying it; every other run calls it before its work starts.
   */
  activate(): void {
    if (this.finished || this.#active) return;
    this.#active = true;
    setState(this.ref, "active");
  }

  /** Appends a messages.jsonl record for this run; dropped once finished. */
  message(record: Record<string, unknown>): void {
    if (this.finished) return;
    appendMessage(this.ref, { ...record, run: this.id });
  }

  async #broadcast(frame: unknown): Promise<void> {
    for (const c of [...this.subscribers]) {
      // Followers (a replay of a live run) get the wire copy marked: they cannot answer approvals.
      if (c.closed) this.subscribers.delete(c);
      else await c.send(c === this.origin ? frame : { ...(frame as object), replay: true });
    }
  }

  /**
   * Ends the run: `done` appended, state and index updated, `onEnd` called, waiters released,
   * and only then `done` streamed. Idempotent.
   */
  async finish(status: RunStatus, options: { latest?: string } = {}): Promise<void> {
    if (this.finished) return;
    this.status = status;
    const ts = Date.now() / 1000;
    const done = { type: "done" as const, run: this.id, status, ts };
    appendEvent(this.ref, done);
    setState(this.ref, status === "ok" ? "done" : status, { latest: options.latest });
    this.index.finish(this.id, status, ts);
    this.#onEnd?.();
    this.#resolve(status);
    await this.#broadcast(done);
  }

  /**
   * A daemon stop: the run did not choose to end and nobody cancelled it, so it is recorded as
   * interrupted (error EINTR, done error; the same facts a restart writes after a crash), then
   * its processes are stopped (via the signal).
   */
  async interrupt(): Promise<boolean> {
    if (this.finished) return false;
    await this.emit({
      type: "error",
      code: "EINTR",
      message: "the run was interrupted: the daemon is stopping",
    });
    const p = this.finish("error");
    this.abort.abort();
    await p;
    return true;
  }

  /** Records the cancellation durably, ends the run, then stops its processes (via the signal). */
  async cancel(): Promise<boolean> {
    if (this.finished) return false;
    appendEvent(this.ref, { type: "cancel", run: this.id, ts: Date.now() / 1000 });
    const p = this.finish("cancelled");
    this.abort.abort();
    await p;
    return true;
  }
}
