import { ignore } from "../abi/errno.ts";
/** Size-rotated log files the host writes: `<path>` grows to a limit, then becomes `<path>.1` by one atomic rename (the previous `.1` is replaced), and a new `<path>` starts. */

/** Rotation limit of the host's logs (bytes): at most this much in `<path>`, as much again in `.1`. */
export const ROTATE_BYTES = 1024 * 1024;

/** The previous file of a rotated log. */
export function previousOf(path: string): string {
  return `${path}.1`;
}

function sizeOf(path: string): number {
  try {
    const st = Deno.lstatSync(path);
    return st.isFile ? st.size : 0;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return 0; // none yet
  }
}

/**
 * Renames `path` to `path.1` (atomic, replacing the previous one) when it holds `limit` bytes or
 * more, or when `adding` more would pass `limit`; true when it rotated. A missing or empty file
 * never rotates. Only regular files are touched.
 */
export function rotate(path: string, options: { limit: number; adding?: number }): boolean {
  const size = sizeOf(path);
  const adding = options.adding ?? 0;
  if (size === 0 || (size < options.limit && size + adding <= options.limit)) return false;
  try {
    Deno.renameSync(path, previousOf(path));
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false; // gone meanwhile: nothing to keep
  }
}

/**
 * Appends `text` (whole lines) to `path` (created 0600), rotating first when the append would pass
 * `limit`. A single append longer than `limit` is kept whole in a fresh file: whole lines are
 * never cut. Errors are swallowed: a log must never fail what it records.
 */
export function appendRotated(path: string, text: string, options: { limit: number }): void {
  if (text === "") return;
  const bytes = new TextEncoder().encode(text);
  rotate(path, { limit: options.limit, adding: bytes.length });
  try {
    const f = Deno.openSync(path, { append: true, create: true, mode: 0o600 });
    try {
      // O_APPEND: every write lands at the end; the host is the one writer.
      for (let off = 0; off < bytes.length;) off += f.writeSync(bytes.subarray(off));
    } finally {
      f.close();
    }
  } catch {
    /* any kind: a log line must never fail a run (the run dir may be gone: the host is closing) */
  }
}
