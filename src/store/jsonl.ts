/** The one JSONL appender and reader for every history file: fsync per record, strict tails. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { syncDir } from "./atomic.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Options for {@link appendRecord}. */
export interface AppendOptions {
  /** Mode for a newly created file (default 0o600: history is private). */
  mode?: number;
}

/**
 * Appends one record as one line with a single write(2) on an O_APPEND fd, then fsyncs.
 * Refuses (EIO) to append after a malformed, newline-less tail: that would glue two records.
 * A short write or a failed write/fsync truncates the file back to its size before the append
 * (so no partial line stays behind to break the history) and answers EIO. The size is taken on
 * the same fd right before the write: a history has one writer at a time (the runtime serializes
 * a session's runs and appends synchronously).
 */
export function appendRecord(path: string, record: unknown, options: AppendOptions = {}): void {
  const line = enc.encode(JSON.stringify(record) + "\n");
  let created = false;
  let f: Deno.FsFile;
  try {
    f = Deno.openSync(path, { read: true, append: true });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, path);
    f = Deno.openSync(path, {
      read: true,
      append: true,
      create: true,
      mode: options.mode ?? 0o600,
    });
    created = true;
  }
  try {
    const size = f.statSync().size;
    if (size > 0) {
      const last = new Uint8Array(1);
      f.seekSync(size - 1, Deno.SeekMode.Start);
      f.readSync(last);
      if (last[0] !== 0x0a) throw new CtxError("EIO", "history ends without a newline", { path });
    }
    try {
      const n = f.writeSync(line);
      if (n !== line.length) {
        throw new CtxError("EIO", `short append (${n} of ${line.length} bytes)`, { path });
      }
      f.syncSync();
    } catch (e) {
      rollBack(f, size, path);
      const err = toCtxError(e, path);
      throw err.errno === "EIO" ? err : new CtxError("EIO", `append failed: ${err}`, { path });
    }
  } finally {
    f.close();
  }
  if (created) syncDir(path.slice(0, Math.max(1, path.lastIndexOf("/"))));
}

/** Cuts a failed append back off (best effort: the error that got us here is what we report). */
function rollBack(f: Deno.FsFile, size: number, path: string): void {
  try {
    f.truncateSync(size);
    f.syncSync();
  } catch (e) {
    console.error(`appendRecord: could not cut a failed append off ${path}: ${e}`);
  }
}

/** Parses JSONL bytes: every line must be JSON and the text must end with a newline; else EIO. */
export function parseRecords(bytes: Uint8Array, path = "<jsonl>"): unknown[] {
  if (bytes.length === 0) return [];
  let text: string;
  try {
    text = dec.decode(bytes);
  } catch {
    throw new CtxError("EIO", "history is not UTF-8", { path });
  }
  if (!text.endsWith("\n")) {
    throw new CtxError("EIO", "history ends without a newline (truncated record)", { path });
  }
  const lines = text.slice(0, -1).split("\n");
  return lines.map((line, i) => {
    try {
      return JSON.parse(line);
    } catch {
      throw new CtxError("EIO", `line ${i + 1} is not JSON`, { path });
    }
  });
}

/** Reads every record of a JSONL file; a missing file is an empty history. */
export function readRecords(path: string): unknown[] {
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw toCtxError(e, path);
  }
  return parseRecords(bytes, path);
}
