/** A session's files, as its owner: open/create, the history appends (now or group-committed), bounded reads, atomic state and small-file writes. */
import { CtxError, toCtxError } from "../../abi/errno.ts";
import { tempName } from "../../abi/names.ts";
import { replaceFile, replaceFilesSoon, syncDir, tempPath } from "../atomic.ts";
import { GroupCommit } from "../commit.ts";
import { appendRecord, appendUnsynced, readRecords } from "../jsonl.ts";
import { checkRegular, readRegularText } from "../regular.ts";
import { prepareBase } from "./claim.ts";
import { asOwner, BOUND, DIR_MODE, FILE_MODE, type SessionRef, type SessionState } from "./ref.ts";

function nowSecs(): string {
  return `${Math.floor(Date.now() / 1000)}\n`;
}

function isDir(path: string): boolean {
  try {
    if (Deno.statSync(path).isDirectory) return true;
    throw new CtxError("ENOTDIR", "session path is not a directory", { path });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw toCtxError(e, path);
  }
}

/** True when the session directory exists (checked as its owner). */
export function sessionExists(ref: SessionRef): boolean {
  return asOwner(ref, () => isDir(ref.dir));
}

/** Creates the session directory and its files if missing; returns true when it was created. */
export function openSession(ref: SessionRef, options: { model?: string } = {}): boolean {
  if (sessionExists(ref)) return false;
  prepareBase(ref);
  return asOwner(ref, () => create(ref, options.model ?? ""));
}

// As the owner: the files are the owner's without any chown, and a planted symlink leads only
// where the owner could go anyway.
function create(ref: SessionRef, model: string): boolean {
  const mode = FILE_MODE[ref.scope];
  // Build in a temp dir and rename: a half-made session is never visible under its name.
  const tmp = `${ref.base}/${tempName(ref.session)}`;
  Deno.mkdirSync(tmp, { mode: DIR_MODE[ref.scope] });
  Deno.chmodSync(tmp, DIR_MODE[ref.scope]);
  const opts = { mode, uid: ref.uid, gid: ref.gid };
  try {
    for (const f of ["messages.jsonl", "events.jsonl"]) {
      Deno.writeFileSync(`${tmp}/${f}`, new Uint8Array(), { mode, createNew: true });
      Deno.chmodSync(`${tmp}/${f}`, mode);
    }
    replaceFile(`${tmp}/state`, "idle\n", opts);
    replaceFile(`${tmp}/latest.md`, "", opts);
    replaceFile(
      `${tmp}/meta.json`,
      JSON.stringify({ client: "ctx", scope: ref.scope, model }) + "\n",
      opts,
    );
    replaceFile(`${tmp}/created_at`, nowSecs(), opts);
    replaceFile(`${tmp}/updated_at`, nowSecs(), opts);
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

/** Appends one record to `messages.jsonl` (as the owner). */
export function appendMessage(ref: SessionRef, record: unknown): void {
  asOwner(ref, () => {
    appendRecord(`${ref.dir}/messages.jsonl`, record, { mode: FILE_MODE[ref.scope] });
  });
}

/** Appends one frame to `events.jsonl` (as the owner). */
export function appendEvent(ref: SessionRef, frame: unknown): void {
  asOwner(ref, () => {
    appendRecord(`${ref.dir}/events.jsonl`, frame, { mode: FILE_MODE[ref.scope] });
  });
}

const commits = new Map<string, GroupCommit>();

/**
 * Appends one record to the session's `name` (`events.jsonl`, `messages.jsonl`) now (one write,
 * as the owner) and resolves once it is durable: the fsync is shared with every record written to
 * that file meanwhile (group commit, off the JS thread). The write's failure throws here; the
 * fsync's rejects the promise (EIO).
 */
function appendSoon(ref: SessionRef, name: string, record: unknown): Promise<void> {
  const path = `${ref.dir}/${name}`;
  const fd = asOwner(ref, () => appendUnsynced(path, record, { mode: FILE_MODE[ref.scope] }));
  let c = commits.get(path);
  if (!c) commits.set(path, c = new GroupCommit(path));
  const commit = c;
  return commit.sync(fd).finally(() => {
    if (!commit.busy && commits.get(path) === commit) commits.delete(path);
  });
}

/** One frame appended to `events.jsonl` (see {@link appendSoon}). */
export function appendEventSoon(ref: SessionRef, frame: unknown): Promise<void> {
  return appendSoon(ref, "events.jsonl", frame);
}

/** One record appended to `messages.jsonl` (see {@link appendSoon}). */
export function appendMessageSoon(ref: SessionRef, record: unknown): Promise<void> {
  return appendSoon(ref, "messages.jsonl", record);
}

/** Every record of `events.jsonl`, read as the owner (EIO when it does not parse). */
export function readEvents(ref: SessionRef): unknown[] {
  return asOwner(ref, () => readRecords(`${ref.dir}/events.jsonl`));
}

/** Every record of `messages.jsonl`, read as the owner (EIO when it does not parse). */
export function readMessages(ref: SessionRef): unknown[] {
  return asOwner(ref, () => readRecords(`${ref.dir}/messages.jsonl`));
}

/**
 * A small session file's text read as the owner (`state`, `updated_at`, ...); missing: undefined.
 * A regular file only (see src/store/regular.ts): a FIFO or symlink there answers EIO.
 */
export function readSessionFile(ref: SessionRef, name: string): string | undefined {
  return asOwner(ref, () => readRegularText(`${ref.dir}/${name}`, BOUND));
}

/** What the runtime reads of a session (below its dir, or its base for the index). */
const READS = ["events.jsonl", "messages.jsonl", "state", "updated_at"];
const INDEX_READS = ["index/list", "index/current"];

/**
 * Checks, as the owner, that every file the runtime reads of a session is a regular file or
 * absent (each opened O_NONBLOCK|O_NOFOLLOW and fstat-checked, nothing read): EIO naming the
 * first that is not. Startup skips such a session as broken; send and resume refuse it up front.
 */
export function checkSession(ref: SessionRef): void {
  asOwner(ref, () => {
    for (const n of READS) checkRegular(`${ref.dir}/${n}`);
    if (ref.scope === "temp") return; // temp sessions have no index
    for (const n of INDEX_READS) checkRegular(`${ref.base}/${n}`);
  });
}

/** Replaces a small session file (`state`, `latest.md`, ...) atomically, as the owner. */
export function writeSessionFile(ref: SessionRef, name: string, text: string): void {
  asOwner(ref, () => {
    replaceFile(`${ref.dir}/${name}`, text, {
      mode: FILE_MODE[ref.scope],
      uid: ref.uid,
      gid: ref.gid,
    });
  });
}

/**
 * Replaces several small session files as one step: every temp file is written, then each is
 * fsynced, all are renamed, then the directory is fsynced once (not once per file, as separate
 * replaces would). Writing them all before the first fsync lets one journal commit carry them
 * all: the later fsyncs find their file already on disk. Each file is whole (old or new) at every
 * instant. Runs as the owner.
 */
export function writeSessionFiles(ref: SessionRef, files: Record<string, string>): void {
  asOwner(ref, () => writeFiles(ref, files));
}

function writeFiles(ref: SessionRef, files: Record<string, string>): void {
  const mode = FILE_MODE[ref.scope];
  const enc = new TextEncoder();
  const pending: { tmp: string; path: string }[] = [];
  const open: Deno.FsFile[] = [];
  try {
    for (const [name, text] of Object.entries(files)) {
      const path = `${ref.dir}/${name}`;
      const tmp = tempPath(path);
      pending.push({ tmp, path });
      const f = Deno.openSync(tmp, { write: true, createNew: true, mode });
      open.push(f);
      const bytes = enc.encode(text);
      let off = 0;
      while (off < bytes.length) off += f.writeSync(bytes.subarray(off));
      Deno.chmodSync(tmp, mode); // the umask must not narrow it
    }
    for (const f of open) f.syncSync();
    while (pending.length) {
      const { tmp, path } = pending[0];
      Deno.renameSync(tmp, path);
      pending.shift();
    }
  } catch (e) {
    for (const { tmp } of pending) {
      try {
        Deno.removeSync(tmp);
      } catch { /* any kind: cleanup on the way out, the real error is thrown next */ }
    }
    throw toCtxError(e, ref.dir);
  } finally {
    for (const f of open) f.close();
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

/**
 * {@link setState} with its fsyncs off the JS thread (src/store/atomic.ts `replaceFilesSoon`):
 * resolves once the files are renamed and durable (`renamed`: called when they are in place).
 * Two of one session must not overlap (the recorder chains them).
 */
export function setStateSoon(
  ref: SessionRef,
  state: SessionState,
  options: { latest?: string; renamed?: () => void } = {},
): Promise<void> {
  return replaceFilesSoon(ref.dir, {
    ...(options.latest !== undefined ? { "latest.md": options.latest } : {}),
    state: `${state}\n`,
    updated_at: nowSecs(),
  }, { mode: FILE_MODE[ref.scope], act: (fn) => asOwner(ref, fn), renamed: options.renamed });
}

/** Reads `state` as the owner (missing or unreadable: idle; not a regular file: EIO). */
export function readState(ref: SessionRef): string {
  try {
    return readSessionFile(ref, "state")?.trim() ?? "idle";
  } catch (e) {
    if (toCtxError(e).errno === "EIO") throw e;
    return "idle";
  }
}
