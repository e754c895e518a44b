/** The built-in fs.* tools: bounded reads and atomic writes, run inside the sandbox as the agent uid. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { replaceFile } from "../store/atomic.ts";

/** What a built-in returns: text content, bounded. */
export interface Output {
  content: string;
  truncated: boolean;
}

type Input = Record<string, unknown>;

/** The bound on one tool input (its JSON), in bytes: E2BIG past it. fs.write content lives in it. */
export const MAX_INPUT = 1 << 20;
/** The largest file fs.replace reads to edit, in bytes: EFBIG past it. */
export const MAX_EDIT = 8 << 20;

function str(input: Input, key: string): string {
  return input[key] as string;
}

/** Cuts text to at most `limit` UTF-8 bytes on a character boundary. */
export function bound(text: string, limit: number): Output {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= limit) return { content: text, truncated: false };
  let end = limit;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return { content: new TextDecoder().decode(bytes.subarray(0, end)), truncated: true };
}

function wrap<T>(path: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw toCtxError(e, path);
  }
}

function read(input: Input, limit: number): Output {
  const path = str(input, "path");
  const offset = (input.offset as number | undefined) ?? 0;
  const want = Math.min((input.limit as number | undefined) ?? limit, limit);
  return wrap(path, () => {
    const pre = Deno.statSync(path);
    if (pre.isDirectory) throw new CtxError("EISDIR", "is a directory", { path });
    // A FIFO or a device would block or never end: this in-process read has no timeout of its own.
    if (!pre.isFile) throw new CtxError("EINVAL", "fs.read reads regular files only", { path });
    const f = Deno.openSync(path, { read: true });
    try {
      const st = f.statSync();
      const size = st.size;
      if (!st.isFile) throw new CtxError("EINVAL", "fs.read reads regular files only", { path });
      f.seekSync(offset, Deno.SeekMode.Start);
      const buf = new Uint8Array(Math.max(0, Math.min(want, size - offset)));
      let n = 0;
      while (n < buf.length) {
        const r = f.readSync(buf.subarray(n));
        if (r === null) break;
        n += r;
      }
      const out = bound(new TextDecoder().decode(buf.subarray(0, n)), limit);
      return { content: out.content, truncated: out.truncated || offset + n < size };
    } finally {
      f.close();
    }
  });
}

function list(input: Input, limit: number): Output {
  const path = str(input, "path");
  return wrap(path, () => {
    // Bounded while reading: a huge directory stops being read once the rows pass the bound,
    // so memory follows `limit`, not the directory. A cut listing is the entries read so far
    // (directory order), sorted.
    const rows: string[] = [];
    let size = 0, more = false;
    for (const e of Deno.readDirSync(path)) {
      if (size > limit) {
        more = true;
        break;
      }
      const row = `${e.name}\t${e.isDirectory ? "dir" : e.isSymlink ? "symlink" : "file"}\n`;
      rows.push(row);
      size += new TextEncoder().encode(row).length;
    }
    const out = bound(rows.sort().join(""), limit);
    return { content: out.content, truncated: out.truncated || more };
  });
}

function stat(input: Input, limit: number): Output {
  const path = str(input, "path");
  return wrap(path, () => {
    const st = Deno.lstatSync(path);
    const type = st.isDirectory ? "dir" : st.isSymlink ? "symlink" : st.isFile ? "file" : "other";
    const info = {
      path,
      type,
      size: st.size,
      mode: ((st.mode ?? 0) & 0o7777).toString(8).padStart(4, "0"),
      uid: st.uid,
      gid: st.gid,
      mtime: st.mtime?.toISOString() ?? null,
    };
    return bound(JSON.stringify(info) + "\n", limit);
  });
}

/** Why the kernel refused a write, as the rule it enforces (the errno stays the kernel's). */
const WRITE_RULE: Record<string, string> = {
  EROFS: "it is on a read-only mount of this sandbox (/ctx, system dirs, /etc entries, .git)",
  EACCES: "the Linux mode/owner does not let this agent write it",
  EPERM: "the Linux mode/owner does not let this agent write it",
  EBUSY: "it is a mount point, which a replace by rename cannot change",
};

/**
 * A kernel refusal of a write as a CtxError naming the rule. Other errors, and a refusal that
 * already names its own rule (replaceFile's fail-closed EPERM has no OS error as its cause), pass
 * unchanged.
 */
function refusal(e: unknown, path: string, what: string): CtxError {
  const err = toCtxError(e, path);
  const rule = WRITE_RULE[err.errno];
  const kernel = !(e instanceof CtxError) ||
    (e.cause instanceof Error && !(e.cause instanceof CtxError));
  if (rule === undefined || !kernel) return err;
  return new CtxError(err.errno, `${what}: ${rule}`, { path, cause: e });
}

/**
 * Writes `path` atomically as the agent. It checks first, without changing anything, that the
 * agent may write the file itself (an open for writing, never truncating): a replace by rename
 * needs only the directory, and must not let an agent overwrite a file whose mode or mount
 * forbids it. The new file belongs to the agent (replaceFile never chowns it to the old owner,
 * which the agent could not do anyway) and keeps the old mode.
 */
function put(path: string, data: string, tool: string): void {
  let exists = true;
  try {
    const st = Deno.lstatSync(path);
    if (st.isDirectory) {
      throw new CtxError("EISDIR", `${tool} writes files, not directories`, { path });
    }
    if (!st.isFile) {
      throw new CtxError("EINVAL", `${tool} replaces regular files only`, { path });
    }
  } catch (e) {
    if (e instanceof CtxError) throw e;
    if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, path);
    exists = false;
  }
  if (exists) {
    try {
      Deno.openSync(path, { write: true }).close();
    } catch (e) {
      throw refusal(e, path, `${tool} refused to write the file`);
    }
  }
  const ids = { uid: Deno.uid() ?? undefined, gid: Deno.gid() ?? undefined };
  try {
    replaceFile(path, data, ids.uid !== undefined && ids.gid !== undefined ? ids : {});
  } catch (e) {
    const dir = path.slice(0, Math.max(path.lastIndexOf("/"), 1)) || ".";
    throw refusal(e, path, `${tool} refused to create a file in ${dir}`);
  }
}

function write(input: Input): Output {
  const path = str(input, "path");
  const content = str(input, "content");
  put(path, content, "fs.write");
  return {
    content: `wrote ${new TextEncoder().encode(content).length} bytes to ${path}\n`,
    truncated: false,
  };
}

function replace(input: Input): Output {
  const path = str(input, "path");
  const old = str(input, "old");
  const text = wrap(path, () => {
    const size = Deno.statSync(path).size;
    if (size > MAX_EDIT) {
      throw new CtxError("EFBIG", `file is ${size} bytes; fs.replace edits at most ${MAX_EDIT}`, {
        path,
      });
    }
    return Deno.readTextFileSync(path);
  });
  if (old === "") throw new CtxError("EINVAL", `"old" is empty`, { path });
  const count = text.split(old).length - 1;
  if (count !== 1) {
    throw new CtxError("EINVAL", `"old" occurs ${count} times (fs.replace needs exactly one)`, {
      path,
    });
  }
  put(path, text.replace(old, () => str(input, "new")), "fs.replace");
  return { content: `replaced 1 occurrence in ${path}\n`, truncated: false };
}

/** The fs built-ins by name; each takes validated input and the output bound in bytes. */
export const FS_TOOLS: Record<string, (input: Input, limit: number) => Output> = {
  "fs.read": read,
  "fs.list": list,
  "fs.stat": stat,
  "fs.write": write,
  "fs.replace": replace,
};
