/** The one JSONL appender and reader for every history file: fsync per record, strict tails. */
import { CtxError, errnoName, toCtxError } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { syncDir } from "./atomic.ts";
import { openRegular, readRegular, sizeOf } from "./regular.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Options for {@link appendRecord}. */
export interface AppendOptions {
  /** Mode for a newly created file (default 0o600: history is private). */
  mode?: number;
}

/**
 * Appends one record as one line with a single write(2) on an O_APPEND fd, then fsyncs. The
 * file must be a regular file (opened by {@link openRegular}: a planted FIFO, symlink or device
 * answers EIO, never a wait).
 * Refuses (EIO) to append after a malformed, newline-less tail: that would glue two records.
 * A short write or a failed write/fsync truncates the file back to its size before the append
 * (so no partial line stays behind to break the history) and answers EIO. The size is taken on
 * the same fd right before the write: a history has one writer at a time (the runtime serializes
 * a session's runs and appends synchronously).
 */
export function appendRecord(path: string, record: unknown, options: AppendOptions = {}): void {
  const fd = writeRecord(path, record, { ...options, sync: true });
  libc.close(fd);
}

/**
 * {@link appendRecord} without the fsync: the line is written (one write(2)) and the open fd is
 * returned for a later fsync, which the caller owns and closes ({@link GroupCommit}). A failed
 * write is cut back off and answers EIO, as in appendRecord.
 */
export function appendUnsynced(path: string, record: unknown, options: AppendOptions = {}): number {
  return writeRecord(path, record, { ...options, sync: false });
}

function writeRecord(
  path: string,
  record: unknown,
  options: AppendOptions & { sync: boolean },
): number {
  const line = enc.encode(JSON.stringify(record) + "\n");
  let created = false;
  let fd: number;
  try {
    fd = openRegular(path, { append: true });
  } catch (e) {
    if (!(e instanceof CtxError && e.errno === "ENOENT")) throw e;
    fd = openRegular(path, { append: true, create: options.mode ?? 0o600 });
    created = true;
  }
  try {
    const size = sizeOf(fd, path);
    if (size > 0) {
      const last = new Uint8Array(1);
      if (libc.pread(fd, last, size - 1) !== 1 || last[0] !== 0x0a) {
        throw new CtxError("EIO", "history ends without a newline", { path });
      }
    }
    try {
      const n = libc.write(fd, line);
      if (n < 0) throw new CtxError(errnoName(-n), "write failed", { path });
      if (n !== line.length) {
        throw new CtxError("EIO", `short append (${n} of ${line.length} bytes)`, { path });
      }
      if (options.sync) {
        const r = libc.fsync(fd);
        if (r < 0) throw new CtxError(errnoName(-r), "fsync failed", { path });
      }
    } catch (e) {
      rollBack(fd, size, path);
      const err = toCtxError(e, path);
      throw err.errno === "EIO" ? err : new CtxError("EIO", `append failed: ${err}`, { path });
    }
  } catch (e) {
    libc.close(fd);
    throw e;
  }
  if (created) syncDir(path.slice(0, Math.max(1, path.lastIndexOf("/"))));
  return fd;
}

/** Cuts a failed append back off (best effort: the error that got us here is what we report). */
function rollBack(fd: number, size: number, path: string): void {
  if (libc.ftruncate(fd, size) < 0 || libc.fsync(fd) < 0) {
    console.error(`appendRecord: could not cut a failed append off ${path}`);
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

/**
 * The largest history file read (64 MiB): a bigger one (a sparse file of holes planted in a
 * session) is refused with EFBIG before a byte is read, so no reader of a session's history (the
 * owner's root-run instance among them) holds more than this for it.
 */
export const HISTORY_MAX = 64 * 1024 * 1024;

/**
 * Reads every record of a JSONL file (a regular file only, else EIO; over {@link HISTORY_MAX}
 * bytes, EFBIG); missing: an empty history.
 */
export function readRecords(path: string): unknown[] {
  const bytes = readRegular(path, { limit: HISTORY_MAX });
  return bytes ? parseRecords(bytes, path) : [];
}
