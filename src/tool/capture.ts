/** Bounded capture of a tool's stdout and stderr while it runs: memory never grows past the bound. */

/** What a capture kept. */
export interface Captured {
  /** stdout then stderr, cut to `limit` bytes on a UTF-8 character boundary. */
  bytes: Uint8Array;
  /** True when the tool wrote more than `limit` bytes in all. */
  truncated: boolean;
  /** Bytes the tool wrote that were read (kept or discarded). */
  total: number;
}

/** Options for {@link Capture}. */
export interface CaptureOptions {
  /** Bytes kept of the combined output. */
  limit: number;
  /**
   * Bytes read in all (kept or discarded) after which `onFlood` is called once: a tool that
   * floods (`yes`) is ended rather than drained until its timeout.
   */
  drain: number;
  /** Called once when `drain` is passed; the caller ends the tool. Reading stops then. */
  onFlood: () => void;
}

/**
 * Reads stdout and stderr of one child at once. Each stream keeps at most `limit` bytes; bytes
 * beyond are counted and dropped, so memory stays at most 2 × `limit` whatever the tool writes.
 */
export class Capture {
  #options: CaptureOptions;
  #kept: [Uint8Array[], Uint8Array[]] = [[], []];
  #size = [0, 0];
  #total = 0;
  #flooded = false;
  #readers: ReadableStreamDefaultReader<Uint8Array>[] = [];

  /** A capture with its bounds. */
  constructor(options: CaptureOptions) {
    this.#options = options;
  }

  /** Reads `stream` (0 stdout, 1 stderr) until EOF or {@link stop}. Never rejects. */
  async pump(stream: ReadableStream<Uint8Array>, which: 0 | 1): Promise<void> {
    const reader = stream.getReader();
    this.#readers.push(reader);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || value === undefined) break;
        this.#take(value, which);
        if (this.#flooded) break;
      }
    } catch { /* any kind: pump never rejects; a failed read ends the capture as EOF does */ }
    await reader.cancel().catch(() => {});
  }

  #take(chunk: Uint8Array, which: 0 | 1): void {
    this.#total += chunk.length;
    const room = this.#options.limit - this.#size[which];
    if (room > 0) {
      // A copy: the stream may reuse its buffer.
      const part = chunk.slice(0, Math.min(room, chunk.length));
      this.#kept[which].push(part);
      this.#size[which] += part.length;
    }
    if (!this.#flooded && this.#total > this.#options.drain) {
      this.#flooded = true;
      this.#options.onFlood();
    }
  }

  /** Stops reading both streams (closing our pipe ends: a writer then gets EPIPE). */
  stop(): void {
    for (const r of this.#readers) r.cancel().catch(() => {});
  }

  /** The bounded result so far. */
  result(): Captured {
    const all = concat([...this.#kept[0], ...this.#kept[1]]);
    const limit = this.#options.limit;
    return {
      bytes: all.length <= limit ? all : all.subarray(0, utf8Cut(all, limit)),
      truncated: this.#total > limit,
      total: this.#total,
    };
  }
}

/** The largest cut ≤ `limit` that does not split a UTF-8 character. */
export function utf8Cut(bytes: Uint8Array, limit: number): number {
  if (bytes.length <= limit) return bytes.length;
  let end = limit;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return end;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
