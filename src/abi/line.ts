/** The agent socket's line format without its schemas: one JSON frame per line, bounded (frames.ts re-exports it). */

/** Largest frame in either direction, newline included (larger is EMSGSIZE). */
export const MAX_FRAME = 1024 * 1024;

/** Serializes one frame as a JSONL line. */
export function encodeFrame(f: unknown): string {
  return JSON.stringify(f) + "\n";
}
