/** The built-in fs.* tools: bounded reads and atomic writes, run inside the sandbox as the agent uid. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { replaceFile } from "../store/atomic.ts";

/** What a built-in returns: text content, bounded. */
export interface Output {
  content: string;
  truncated: boolean;
}

type Input = Record<string, unknown>;

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
    const f = Deno.openSync(path, { read: true });
    try {
      const size = f.statSync().size;
      if (f.statSync().isDirectory) throw new CtxError("EISDIR", "is a directory", { path });
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
    const rows = [...Deno.readDirSync(path)]
      .map((e) => `${e.name}\t${e.isDirectory ? "dir" : e.isSymlink ? "symlink" : "file"}`)
      .sort();
    return bound(rows.map((r) => r + "\n").join(""), limit);
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

function write(input: Input): Output {
  const path = str(input, "path");
  const content = str(input, "content");
  wrap(path, () => replaceFile(path, content));
  return {
    content: `wrote ${new TextEncoder().encode(content).length} bytes to ${path}\n`,
    truncated: false,
  };
}

function replace(input: Input): Output {
  const path = str(input, "path");
  const old = str(input, "old");
  const text = wrap(path, () => Deno.readTextFileSync(path));
  if (old === "") throw new CtxError("EINVAL", `"old" is empty`, { path });
  const count = text.split(old).length - 1;
  if (count !== 1) {
    throw new CtxError("EINVAL", `"old" occurs ${count} times (fs.replace needs exactly one)`, {
      path,
    });
  }
  wrap(path, () => replaceFile(path, text.replace(old, () => str(input, "new"))));
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
