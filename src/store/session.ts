/** Durable session directories: history files, state/meta/latest, and the session index files. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import type { Scope } from "../abi/frames.ts";
import { ensureDir, replaceFile, syncDir, tempPath } from "./atomic.ts";
import { appendRecord } from "./jsonl.ts";

/** Session states written to `state`. */
export type SessionState = "idle" | "active" | "done" | "error" | "cancelled";

/** Who owns a session's files: the agent identity (its `uid`/`gid` controls). */
export interface Owner {
  uid: number;
  gid: number;
}

/** Where one session lives and who owns it. */
export interface SessionRef extends Owner {
  /** Absolute session directory. */
  dir: string;
  /** Directory holding `index/` (the parent `session/` dir). */
  base: string;
  agent: string;
  session: string;
  scope: Scope;
}

/** Options for {@link sessionRef}. */
export interface LocateOptions extends Owner {
  /** The tree (generation) root. */
  root: string;
  /** Live run dir: temp sessions live here, never in the durable tree. */
  run: string;
  agent: string;
  session: string;
  scope: Scope;
}

/** Resolves a session's directory: private under home/<uid>, shared under shared/agents, temp under run. */
export function sessionRef(o: LocateOptions): SessionRef {
  const base = o.scope === "private"
    ? `${o.root}/home/${o.uid}/agent/${o.agent}/session`
    : o.scope === "shared"
    ? `${o.root}/shared/agents/agent/${o.agent}/session`
    : `${o.run}/temp/${o.uid}/${o.agent}/session`;
  return { ...o, base, dir: `${base}/${o.session}` };
}

const DIR_MODE = { private: 0o700, shared: 0o770, temp: 0o700 } as const;
const FILE_MODE = { private: 0o600, shared: 0o660, temp: 0o600 } as const;

function own(path: string, o: Owner): void {
  if (Deno.uid() === 0 && (o.uid !== 0 || o.gid !== 0)) Deno.chownSync(path, o.uid, o.gid);
}

function mkdirOwned(dir: string, mode: number, o: Owner): void {
  try {
    Deno.mkdirSync(dir, { mode });
  } catch (e) {
    if (e instanceof Deno.errors.AlreadyExists) return;
    if (e instanceof Deno.errors.NotFound) {
      mkdirOwned(dir.slice(0, dir.lastIndexOf("/")), mode, o);
      return mkdirOwned(dir, mode, o);
    }
    throw toCtxError(e, dir);
  }
  Deno.chmodSync(dir, mode);
  own(dir, o);
  syncDir(dir.slice(0, dir.lastIndexOf("/")));
}

function nowSecs(): string {
  return `${Math.floor(Date.now() / 1000)}\n`;
}

/** Creates the session directory and its files if missing; returns true when it was created. */
export function openSession(ref: SessionRef, options: { model?: string } = {}): boolean {
  try {
    if (Deno.statSync(ref.dir).isDirectory) return false;
    throw new CtxError("ENOTDIR", "session path is not a directory", { path: ref.dir });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, ref.dir);
  }
  const mode = FILE_MODE[ref.scope];
  ensureDir(ref.base.slice(0, ref.base.lastIndexOf("/")), 0o755);
  mkdirOwned(ref.base, DIR_MODE[ref.scope], ref);
  // Build in a temp dir and rename: a half-made session is never visible under its name.
  const tmp = `${ref.base}/.${ref.session}.tmp-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  mkdirOwned(tmp, DIR_MODE[ref.scope], ref);
  const opts = { mode, uid: ref.uid, gid: ref.gid };
  for (const f of ["messages.jsonl", "events.jsonl"]) {
    Deno.writeFileSync(`${tmp}/${f}`, new Uint8Array(), { mode });
    Deno.chmodSync(`${tmp}/${f}`, mode);
    own(`${tmp}/${f}`, ref);
  }
  replaceFile(`${tmp}/state`, "idle\n", opts);
  replaceFile(`${tmp}/latest.md`, "", opts);
  replaceFile(
    `${tmp}/meta.json`,
    JSON.stringify({ client: "ctx", scope: ref.scope, model: options.model ?? "" }) + "\n",
    opts,
  );
  replaceFile(`${tmp}/created_at`, nowSecs(), opts);
  replaceFile(`${tmp}/updated_at`, nowSecs(), opts);
  try {
    Deno.renameSync(tmp, ref.dir);
  } catch (e) {
    Deno.removeSync(tmp, { recursive: true });
    // Another creator won the race (or a non-empty dir exists): theirs is as good as ours.
    if (e instanceof Deno.errors.AlreadyExists || (e as { code?: string }).code === "ENOTEMPTY") {
      return false;
    }
    throw toCtxError(e, ref.dir);
  }
  syncDir(ref.base);
  return true;
}

/** Appends one record to `messages.jsonl`. */
export function appendMessage(ref: SessionRef, record: unknown): void {
  appendRecord(`${ref.dir}/messages.jsonl`, record, { mode: FILE_MODE[ref.scope] });
}

/** Appends one frame to `events.jsonl`. */
export function appendEvent(ref: SessionRef, frame: unknown): void {
  appendRecord(`${ref.dir}/events.jsonl`, frame, { mode: FILE_MODE[ref.scope] });
}

/** Replaces a small session file (`state`, `latest.md`, ...) atomically, keeping its owner. */
export function writeSessionFile(ref: SessionRef, name: string, text: string): void {
  replaceFile(`${ref.dir}/${name}`, text, {
    mode: FILE_MODE[ref.scope],
    uid: ref.uid,
    gid: ref.gid,
  });
}

/**
 * Replaces several small session files as one step: each temp file is written and fsynced, all are
 * renamed, then the directory is fsynced once (not once per file, as separate replaces would).
 * Each file is whole (old or new) at every instant.
 */
export function writeSessionFiles(ref: SessionRef, files: Record<string, string>): void {
  const mode = FILE_MODE[ref.scope];
  const enc = new TextEncoder();
  const pending: { tmp: string; path: string }[] = [];
  try {
    for (const [name, text] of Object.entries(files)) {
      const path = `${ref.dir}/${name}`;
      const tmp = tempPath(path);
      pending.push({ tmp, path });
      const f = Deno.openSync(tmp, { write: true, createNew: true, mode });
      try {
        const bytes = enc.encode(text);
        let off = 0;
        while (off < bytes.length) off += f.writeSync(bytes.subarray(off));
        f.syncSync();
      } finally {
        f.close();
      }
      Deno.chmodSync(tmp, mode); // the umask must not narrow it
      own(tmp, ref);
    }
    while (pending.length) {
      const { tmp, path } = pending[0];
      Deno.renameSync(tmp, path);
      pending.shift();
    }
  } catch (e) {
    for (const { tmp } of pending) {
      try {
        Deno.removeSync(tmp);
      } catch { /* never created */ }
    }
    throw toCtxError(e, ref.dir);
  }
  syncDir(ref.dir);
}

/** Sets `state` and `updated_at` (and `latest.md` when given) in one {@link writeSessionFiles}. */
export function setState(
  ref: SessionRef,
  state: SessionState,
  options: { latest?: string } = {},
): void {
  writeSessionFiles(ref, {
    ...(options.latest !== undefined ? { "latest.md": options.latest } : {}),
    state: `${state}\n`,
    updated_at: nowSecs(),
  });
}

/** Reads `state` (missing: idle). */
export function readState(dir: string): string {
  try {
    return Deno.readTextFileSync(`${dir}/state`).trim();
  } catch {
    return "idle";
  }
}

/** The `by-cwd` key: `cwd-` + 16 hex digits of the FNV-1a 64 hash of the chroot cwd. */
export function cwdKey(cwd: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(cwd)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `cwd-${h.toString(16).padStart(16, "0")}`;
}

/** Records a session as the most recent: `index/list` (newest first), `index/current`, `index/by-cwd/<key>`. */
export function touchIndex(ref: SessionRef, cwd: string): void {
  if (ref.scope === "temp") return; // temp sessions are never listed for resume
  const idx = `${ref.base}/index`;
  mkdirOwned(idx, DIR_MODE[ref.scope], ref);
  mkdirOwned(`${idx}/by-cwd`, DIR_MODE[ref.scope], ref);
  const opts = { mode: FILE_MODE[ref.scope], uid: ref.uid, gid: ref.gid };
  const list = listSessions(ref.base).filter((s) => s !== ref.session);
  const next = [ref.session, ...list].join("\n") + "\n";
  // Each replace costs fsyncs: rewrite only what changed (the common case is "same session again").
  const put = (path: string, text: string) => {
    try {
      if (Deno.readTextFileSync(path) === text) return;
    } catch { /* absent: write it */ }
    replaceFile(path, text, opts);
  };
  put(`${idx}/list`, next);
  put(`${idx}/current`, `${ref.session}\n`);
  put(`${idx}/by-cwd/${cwdKey(cwd)}`, `${ref.session}\n`);
}

/** The names in `index/list`, newest first (missing: empty). */
export function listSessions(base: string): string[] {
  try {
    return Deno.readTextFileSync(`${base}/index/list`).split("\n").filter((s) => s !== "");
  } catch {
    return [];
  }
}

/** The `index/current` session of a session base dir, else undefined. */
export function currentSession(base: string): string | undefined {
  try {
    return Deno.readTextFileSync(`${base}/index/current`).trim() || undefined;
  } catch {
    return undefined;
  }
}
