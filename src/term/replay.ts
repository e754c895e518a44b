/** `replay`: a terminal's recorded output written back with its timing, like scriptreplay. */
import { Buffer } from "node:buffer";
import type { TerminalEvent } from "../abi/terminal.ts";

/** Options for {@link replay}. */
export interface ReplayOptions {
  /** Playback speed factor (2 = twice as fast); default 1. */
  speed?: number;
  /** Write everything at once, without waiting between chunks. */
  noWait?: boolean;
  /** Longest pause between two chunks, in seconds (scriptreplay's -m); default 2. */
  maxWait?: number;
  /** Where the bytes go. */
  write(bytes: Uint8Array): void | Promise<void>;
  /** How to wait (tests pass their own); default a timer. */
  sleep?: (ms: number) => Promise<void>;
}

/** Writes every `pty.output` event's bytes in order; returns how many bytes were written. */
export async function replay(events: TerminalEvent[], o: ReplayOptions): Promise<number> {
  const speed = o.speed ?? 1;
  const maxWait = o.maxWait ?? 2;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let last: number | undefined;
  let total = 0;
  for (const e of events) {
    if (e.type !== "pty.output") continue;
    if (!o.noWait && last !== undefined) {
      const gap = Math.min(maxWait, Math.max(0, e.ts - last) / speed);
      if (gap > 0.001) await sleep(gap * 1000);
    }
    last = e.ts;
    const bytes = new Uint8Array(Buffer.from(e.data_b64, "base64"));
    total += bytes.length;
    await o.write(bytes);
  }
  return total;
}
