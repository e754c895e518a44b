/** One run's recorder: the only writer of its frames; everything goes to events.jsonl, then to clients. */
import {
  encodeFrame,
  errorOf,
  fitFrame,
  type Frame,
  MAX_DELTA,
  MAX_FRAME,
  replayOf,
  type RunStatus,
  splitText,
} from "../abi/frames.ts";
import type { RunIndex } from "../store/runs.ts";
import { appendEventSoon, appendMessageSoon, setStateSoon } from "../store/session/files.ts";
import type { SessionRef } from "../store/session/ref.ts";
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

/**
 * Frames one run may have written but not yet streamed (each waits for its group commit). The
 * producer waits beyond this, so a slow client still slows the agent down (backpressure), while
 * up to this many frames share one fsync.
 */
const WINDOW = 64;

/**
 * The model's output as it streams (text, reasoning, usage, the assistant message): nothing the
 * run does next depends on it being stored, so its producer goes on while it is written and
 * fsynced (one group commit then covers it and what follows). Every other frame comes before an
 * effect (the model request, a tool call, an approval wait, the run's end) and is waited for.
 */
function outputOnly(f: Frame): boolean {
  return f.type === "delta" || f.type === "reasoning_delta" || f.type === "usage" ||
    (f.type === "message" && f.role === "assistant");
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
  readonly #onEnd?: () => void | Promise<void>;
  #finished: Promise<RunStatus>;
  #active = false;
  #resolve!: (s: RunStatus) => void;
  /** Frames written so far, and how many of them are durable and streamed (in order). */
  #written = 0;
  #streamed = 0;
  /** Where each subscriber joined: the #streamed count at that moment. */
  #joined = new Map<Conn, number>();
  /** Each written frame's stream step, in order: durable (group commit), then broadcast. */
  #queue: Promise<void>[] = [];
  #tail: Promise<void> = Promise.resolve();
  /** The session's `state` writes, chained: `active`, then the final one. */
  #state: Promise<void> = Promise.resolve();
  /** Every message appended so far, durable (`done` is written only after them). */
  #messages: Promise<void> = Promise.resolve();

  constructor(
    options: {
      id: string;
      ref: SessionRef;
      index: RunIndex;
      origin: Conn;
      /**
       * Called once the run's end is recorded and before `done` goes out: what a client reads
       * after seeing `done` (the agent's `status`) already says the run ended. When it returns a
       * promise (an instance's host writes the status), `done` goes out once it resolves.
       */
      onEnd?: () => void | Promise<void>;
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

  /**
   * Records a frame durably, then streams it; dropped once the run is finished. With `after`,
   * the frame (and so every later one) is streamed only once that resolves too: its write and
   * fsync overlap the wait (`start` waits for the host to have written `busy`).
   */
  async emit(frame: RunFrame, options: { after?: Promise<unknown> } = {}): Promise<void> {
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
    if (stamped.type === "tool_call") this.index.call(this.id);
    const after = options.after;
    this.#record(stamped, true, after && (() => after));
    if (this.#queue.length > WINDOW) await this.#queue.shift();
    if (!outputOnly(stamped)) await this.settled();
  }

  /**
   * Writes a frame now and chains its stream step: durable (group commit), then broadcast to the
   * subscribers that joined before it was written (`broadcast` false: stored only, as `cancel`).
   * The fsync is shared with the frames written while an earlier one ran, so a delta flood costs
   * O(flushes), not O(frames); steps complete in write order.
   */
  #record(frame: Frame, broadcast: boolean, gate?: () => unknown): void {
    const durable = appendEventSoon(this.ref, frame);
    const seq = ++this.#written;
    const prev = this.#tail;
    const step = (async () => {
      await prev;
      await durable;
      // Read after the awaits above: the caller sets what it waits on right after this call.
      if (gate) await gate();
      if (broadcast) await this.#broadcast(frame, seq);
      this.#streamed = seq;
    })();
    step.catch(() => {}); // surfaced by the awaits on it and by settled()
    this.#tail = step;
    this.#queue.push(step);
  }

  /** Resolves when every frame written so far is durable and streamed (EIO if a flush failed). */
  async settled(): Promise<void> {
    const tail = this.#tail;
    await tail;
    if (this.#tail === tail) this.#queue = [];
  }

  /**
   * Adds a follower, synchronously: it is sent every frame streamed after this moment; the count
   * returned is how many of this run's stored frames (in events.jsonl order) were streamed before
   * it, which the follower replays itself. Each frame is thus in exactly one of the two, the
   * replay holds only durable frames, and it is queued before any later broadcast.
   */
  follow(conn: Conn): number {
    this.#joined.set(conn, this.#streamed);
    this.subscribers.add(conn);
    return this.#streamed;
  }

  /**
   * Frames recorded from now on are streamed only once `p` resolves; a failure fails them (EIO),
   * as a failed group fsync does. What `p` stands for (a message durable, `active` in place) is
   * therefore true for every client that saw a later frame.
   */
  #gate(p: Promise<void>): void {
    const prev = this.#tail;
    const step = (async () => {
      await prev;
      await p;
    })();
    step.catch(() => {}); // surfaced by the steps after it and by settled()
    this.#tail = step;
  }

  /**
   * Sets the session `state` to `active` once (idempotent; nothing once finished). The write and
   * its fsyncs run off the JS thread: the work goes on meanwhile, and every later frame is
   * streamed only once it is in place (a client that saw one reads `active`; its directory fsync
   * need not hold the stream up: `done` waits for it). Executable runs call it right
   * after spawning the agent; every other run before its work starts.
   */
  activate(): void {
    if (this.finished || this.#active) return;
    this.#active = true;
    let renamed!: () => void;
    const visible = new Promise<void>((r) => renamed = r);
    const p = setStateSoon(this.ref, "active", { renamed });
    this.#state = p;
    p.catch(() => {}); // a failure after the rename surfaces at finish (done's gate)
    this.#gate(Promise.race([visible, p]));
  }

  /**
   * Appends a messages.jsonl record for this run (written now, fsynced off the JS thread; later
   * frames stream once it is durable); dropped once finished.
   */
  message(record: Record<string, unknown>): void {
    if (this.finished) return;
    const p = appendMessageSoon(this.ref, { ...record, run: this.id });
    this.#messages = this.#messages.then(() => p);
    this.#messages.catch(() => {}); // surfaced through the gate
    this.#gate(p);
  }

  async #broadcast(frame: Frame, seq: number): Promise<void> {
    for (const c of [...this.subscribers]) {
      // Followers (a replay of a live run) get the wire copy marked: they cannot answer approvals.
      if (c.closed) this.subscribers.delete(c);
      else if (seq > (this.#joined.get(c) ?? 0)) {
        await c.send(c === this.origin ? frame : replayOf(frame));
      }
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
    const ended: { hook?: void | Promise<void> } = {};
    // The final state is written after `active` (whatever became of it), its fsyncs overlapping
    // done's and the host's status write; done streams once all three are through.
    const final = status === "ok" ? "done" : status;
    const state = this.#state.catch(() => {}).then(() =>
      setStateSoon(this.ref, final, { latest: options.latest })
    );
    state.catch(() => {}); // surfaced through done's gate
    this.#state = state;
    // A stored `done` means the run's messages are stored too (a failure fails done's stream).
    await this.#messages.catch(() => {});
    this.#record(done, true, () => Promise.all([ended.hook, state]));
    this.index.finish(this.id, status, ts);
    ended.hook = this.#onEnd?.();
    this.#resolve(status);
    await this.settled();
  }

  /** Ends the run as failed: one host error frame (`code`, `message`, `extra`), then `done` error. */
  async fail(code: string, message: string, extra: { tool?: string } = {}): Promise<void> {
    await this.emit(errorOf(code, message, extra));
    await this.finish("error");
  }

  /**
   * A daemon stop: the run did not choose to end and nobody cancelled it, so it is recorded as
   * interrupted (error EINTR, done error; the same facts a restart writes after a crash), then
   * its processes are stopped (via the signal).
   */
  async interrupt(): Promise<boolean> {
    if (this.finished) return false;
    await this.emit(errorOf("EINTR", "the run was interrupted: the daemon is stopping"));
    const p = this.finish("error");
    this.abort.abort();
    await p;
    return true;
  }

  /** Records the cancellation durably, ends the run, then stops its processes (via the signal). */
  async cancel(): Promise<boolean> {
    if (this.finished) return false;
    this.#record({ type: "cancel", run: this.id, ts: Date.now() / 1000 } as Frame, false);
    const p = this.finish("cancelled");
    this.abort.abort();
    await p;
    return true;
  }
}
