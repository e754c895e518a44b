/** Durable session directories: history files, state/meta/latest, and the session index files. */
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import type { Scope } from "../abi/frames.ts";
import { sessionBase } from "../abi/layout.ts";
import { tempName } from "../abi/names.ts";
import { asUser, currentFsId } from "../sys/fsid.ts";
import { replaceFile, replaceFilesSoon, syncDir, tempPath } from "./atomic.ts";
import { GroupCommit } from "./commit.ts";
import { appendRecord, appendUnsynced, HISTORY_MAX, readRecords } from "./jsonl.ts";
import { checkRegular, readRegularText } from "./regular.ts";

/** Every session file is read with the history bound: a planted sparse file is EFBIG, never read. */
const BOUND = { limit: HISTORY_MAX };

/** Session states written to `state`. */
export type SessionState = "idle" | "active" | "done" | "error" | "cancelled";

/**
 * Who owns a session's files: the agent identity (its `uid`/`gid`/`groups` controls). Every
 * operation on a session tree runs with this filesystem identity (src/sys/fsid.ts), never root's.
 */
export interface Owner {
  uid: number;
  gid: number;
  /** Supplementary groups of the identity (default none). */
  groups?: readonly number[];
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
  /** The directory root keeps (the tree root, or the run dir for temp sessions). */
  trust: string;
  /** Path below `trust` of the first directory the owner owns (root makes it and gives it away). */
  claim: string;
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

/** The first directory an identity owns for a scope, below its trusted root. */
function claimOf(o: { scope: Scope; uid: number; agent: string }): string {
  return o.scope === "private"
    ? `home/${o.uid}`
    : o.scope === "shared"
    ? `shared/agents/agent/${o.agent}/session`
    : `temp/${o.uid}`;
}

export { sessionBase };

/** Resolves a session's directory: private under home/<uid>, shared under shared/agents, temp under run. */
export function sessionRef(o: LocateOptions): SessionRef {
  const trust = o.scope === "temp" ? o.run : o.root;
  const base = sessionBase(o);
  return {
    uid: o.uid,
    gid: o.gid,
    groups: o.groups ?? [],
    agent: o.agent,
    session: o.session,
    scope: o.scope,
    base,
    dir: `${base}/${o.session}`,
    trust,
    claim: claimOf(o),
  };
}

const DIR_MODE = { private: 0o700, shared: 0o770, temp: 0o700 } as const;
const FILE_MODE = { private: 0o600, shared: 0o660, temp: 0o600 } as const;
/** Mode of `home/<uid>` and `<run>/temp/<uid>`: private to the uid (the mount shows it as is). */
export const HOME_MODE = 0o700;
/** Mode of an agent home `home/<uid>/agent/<a>` (the sandbox binds it as HOME). */
export const AGENT_HOME_MODE = 0o700;

/** Runs `fn` as the session's owner (filesystem identity); `fn` must be synchronous. */
export function asOwner<T>(o: Owner, fn: () => T): T {
  return asUser({ uid: o.uid, gid: o.gid, groups: o.groups ?? [] }, fn);
}

function lstatOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw toCtxError(e, path);
  }
}

/** mkdir that tolerates an existing directory; returns true when it created `dir`. */
export function mkdirOnce(dir: string, mode: number): boolean {
  try {
    Deno.mkdirSync(dir, { mode });
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw toCtxError(e, dir);
    const st = lstatOrNull(dir);
    if (st?.isDirectory) return false;
    throw new CtxError(st?.isSymlink ? "ELOOP" : "ENOTDIR", "not a directory", { path: dir });
  }
  Deno.chmodSync(dir, mode); // the umask must not narrow it
  syncDir(dir.slice(0, dir.lastIndexOf("/")));
  return true;
}

/**
 * True when root may create entries in `dir` on a user's behalf: root's own (or the caller's) and
 * writable by no one else, or root's with the sticky bit (the mount shows `home/` as 01777: nobody
 * can remove or rename an entry they do not own there, and an existing entry is lstat-checked).
 */
function trusted(st: Deno.FileInfo, self: number): boolean {
  const mode = st.mode ?? 0;
  return st.isDirectory && !st.isSymlink && (st.uid === 0 || st.uid === self) &&
    ((mode & 0o022) === 0 || (st.uid === 0 && (mode & 0o1000) !== 0));
}

/** One {@link claimDir} call as data: what an instance asks its host to run. */
export interface Claim {
  trust: string;
  claim: string;
  uid: number;
  gid: number;
  mode: number;
  legacy: string[];
}

let delegate: ((c: Claim) => void) | undefined;

/**
 * From now on, a {@link claimDir} of this process that must give a directory away (chown) hands
 * the whole call to `fn` instead (an instance: its host runs it, src/runtime/channel.ts), which
 * must run it to its end synchronously or throw.
 */
export function delegateClaims(fn: (c: Claim) => void): void {
  delegate = fn;
}

/**
 * Makes sure `<trust>/<claim>` exists as a real directory owned by `o` (mode `mode`), creating
 * the root-owned levels above it. Runs with root's authority, so it only ever works inside
 * directories nobody else can write (checked with lstat, level by level: no symlink is followed
 * that a user could have planted). An existing claim owned by root is a tree from before
 * per-user ownership: it and the root-owned real directories in `legacy` (paths below the claim,
 * deepest first) are given to `o`, bottom-up, while the claim is still root's (nobody can swap
 * entries meanwhile). Owned by anyone else: EACCES.
 */
export function claimDir(
  trust: string,
  claim: string,
  o: Owner,
  options: { mode: number; legacy?: string[] },
): void {
  const self = currentFsId().uid;
  // Where a chown is due and this process has no capability for it (an instance): its host runs
  // this same function for it, from the start.
  const give = () => {
    if (!delegate) return false;
    delegate({
      trust,
      claim,
      uid: o.uid,
      gid: o.gid,
      mode: options.mode,
      legacy: options.legacy ?? [],
    });
    return true;
  };
  const parts = claim.split("/");
  let p = trust;
  for (let i = 0; i < parts.length - 1; i++) {
    p = `${p}/${parts[i]}`;
    mkdirOnce(p, 0o755);
    const st = Deno.lstatSync(p);
    if (st.uid === o.uid && st.uid !== 0 && st.isDirectory && !st.isSymlink) {
      // The owner already owns an ancestor: whatever is below is theirs to make.
      const rest = parts.slice(i + 1);
      asOwner(o, () => {
        let q = p;
        for (const r of rest) mkdirOnce(q = `${q}/${r}`, r === rest.at(-1) ? options.mode : 0o755);
      });
      return;
    }
    if (!trusted(st, self)) {
      throw new CtxError(
        "EACCES",
        `refusing to create ${claim} for uid ${o.uid}: ${p} is not a directory only root can write`,
        { path: p },
      );
    }
  }
  const dir = `${trust}/${claim}`;
  if (o.uid === self) {
    mkdirOnce(dir, options.mode);
    return;
  }
  if (mkdirOnce(dir, options.mode)) {
    if (give()) return;
    Deno.chownSync(dir, o.uid, o.gid); // just made in a root-only directory: nothing to swap
    return;
  }
  const st = Deno.lstatSync(dir);
  if (st.uid === o.uid) return;
  if (st.uid !== 0) {
    throw new CtxError("EACCES", `${claim} belongs to uid ${st.uid}, not ${o.uid}`, { path: dir });
  }
  if (give()) return;
  for (const rel of options.legacy ?? []) {
    const q = `${dir}/${rel}`;
    const lst = lstatOrNull(q);
    if (lst && lst.isDirectory && !lst.isSymlink && lst.uid === 0) Deno.chownSync(q, o.uid, o.gid);
  }
  Deno.chmodSync(dir, options.mode);
  Deno.chownSync(dir, o.uid, o.gid);
}

/** Levels between a claim and a session base (deepest first): what older trees made root's. */
function legacyOf(ref: SessionRef): string[] {
  const below = ref.base.slice(`${ref.trust}/${ref.claim}`.length + 1).split("/").slice(0, -1);
  return below.map((_, i) => below.slice(0, below.length - i).join("/")).filter((x) => x);
}

/** The claim a session of `ref` needs: its scope's first directory, given to the owner. */
function claimOfRef(ref: SessionRef): Claim {
  const mode = ref.scope === "shared" ? DIR_MODE.shared : HOME_MODE;
  const { trust, claim, uid, gid } = ref;
  return { trust, claim, uid, gid, mode, legacy: legacyOf(ref) };
}

/** The claim an agent home needs: `home/<uid>` given to the uid. */
function homeClaim(root: string, o: Owner & { agent: string }): Claim {
  const legacy = [`agent/${o.agent}`, "agent"];
  return { trust: root, claim: `home/${o.uid}`, uid: o.uid, gid: o.gid, mode: HOME_MODE, legacy };
}

/**
 * Every claim the runtime makes for agent `o.agent` with identity `o` (its sessions of each scope,
 * its agent home): the only ones a host runs for that agent's instance.
 */
export function claimsOf(o: { root: string; run: string; agent: string } & Owner): Claim[] {
  const ref = (scope: Scope) => sessionRef({ ...o, session: "default", scope });
  return [
    ...(["private", "shared", "temp"] as const).map((s) => claimOfRef(ref(s))),
    homeClaim(o.root, o),
  ];
}

/** Runs claim `c` for `o` (its uid and gid are the claim's; its groups reach the mkdirs below). */
export function runClaim(c: Claim, o: Owner): void {
  claimDir(c.trust, c.claim, o, { mode: c.mode, legacy: c.legacy });
}

/** Creates the session base dir (`.../session`) and everything above it, each level as its owner. */
function prepareBase(ref: SessionRef): void {
  const claimed = `${ref.trust}/${ref.claim}`;
  runClaim(claimOfRef(ref), ref);
  if (claimed === ref.base) return;
  const below = ref.base.slice(claimed.length + 1).split("/");
  asOwner(ref, () => {
    let q = claimed;
    below.forEach((part, i) => {
      q = `${q}/${part}`;
      // home/<uid>/agent/<a> is the agent home: as private as the session below it.
      const mode = i === below.length - 1
        ? DIR_MODE[ref.scope]
        : i === below.length - 2
        ? AGENT_HOME_MODE
        : 0o755;
      mkdirOnce(q, mode);
    });
  });
}

/**
 * Makes sure the agent home `home/<uid>/agent/<agent>` exists and belongs to `o` (`home/<uid>` is
 * made by root and given to the uid; everything below is made as the uid). Returns its path.
 */
export function ensureAgentHome(root: string, o: Owner & { agent: string }): string {
  runClaim(homeClaim(root, o), o);
  const home = `${root}/home/${o.uid}/agent/${o.agent}`;
  asOwner(o, () => {
    mkdirOnce(`${root}/home/${o.uid}/agent`, 0o755);
    mkdirOnce(home, AGENT_HOME_MODE);
  });
  return home;
}

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

/** The `by-cwd` key: `cwd-` + 16 hex digits of the FNV-1a 64 hash of the chroot cwd. */
export function cwdKey(cwd: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(cwd)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `cwd-${h.toString(16).padStart(16, "0")}`;
}

/**
 * Records a session as the most recent: `index/list` (newest first), `index/current`,
 * `index/by-cwd/<key>`. Runs as the owner: `index/` is in the owner's directory.
 */
export function touchIndex(ref: SessionRef, cwd: string): void {
  if (ref.scope === "temp") return; // temp sessions are never listed for resume
  asOwner(ref, () => {
    const idx = `${ref.base}/index`;
    mkdirOnce(idx, DIR_MODE[ref.scope]);
    mkdirOnce(`${idx}/by-cwd`, DIR_MODE[ref.scope]);
    const opts = { mode: FILE_MODE[ref.scope], uid: ref.uid, gid: ref.gid };
    const list = listSessions(ref.base).filter((s) => s !== ref.session);
    const next = [ref.session, ...list].join("\n") + "\n";
    // Each replace costs fsyncs: rewrite only what changed (the common case is "same session again").
    const put = (path: string, text: string) => {
      if (readRegularText(path, BOUND) !== text) replaceFile(path, text, opts);
    };
    put(`${idx}/list`, next);
    put(`${idx}/current`, `${ref.session}\n`);
    put(`${idx}/by-cwd/${cwdKey(cwd)}`, `${ref.session}\n`);
  });
}

/** The names in `index/list`, newest first (missing: empty; not a regular file: EIO). */
export function listSessions(base: string): string[] {
  const text = readRegularText(`${base}/index/list`, BOUND) ?? "";
  return text.split("\n").filter((s) => s !== "");
}

/** The `index/current` session of a session base dir, else undefined (never waits on a FIFO). */
export function currentSession(base: string): string | undefined {
  try {
    return readRegularText(`${base}/index/current`, BOUND)?.trim() || undefined;
  } catch (e) {
    ignore(e, "EIO", "EFBIG", "ELOOP", "ENOTDIR", "EACCES");
    return undefined;
  }
}

/** Resolves the identity owning `agent`'s sessions (found under `home/<uid>` when `uid` is given). */
export type IdentityOf = (agent: string, uid?: number) => Owner | undefined;

/** gid of identities startup cannot learn from a definition: no group's files are reachable. */
const NOGROUP = 65534;

// Real directories only (a symlinked entry is not followed), dot names (temps) skipped.
function dirNames(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].filter((e) => e.isDirectory && !e.name.startsWith("."))
      .map((e) => e.name).sort();
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.PermissionDenied);
    return []; // absent or not listable by this identity: nothing found there
  }
}

function sessionsOf(o: LocateOptions): SessionRef[] {
  const base = sessionRef(o);
  return asOwner(o, () => dirNames(base.base))
    .filter((s) => s !== "index")
    .map((session) => sessionRef({ ...o, session }));
}

/**
 * Every session of a tree (private, shared) and of the run dir (temp), each with the identity
 * that owns it. Root lists only its own levels (`home/`, `shared/agents/agent/`, `<run>/temp/`);
 * every listing below runs as the owner: a directory under `home/<uid>` is uid's (with the
 * agent's gid and groups when the agent still has that uid, else no group), a shared session is
 * the agent's (skipped when the agent is gone: nobody to act as).
 */
export function findSessions(
  root: string,
  run: string,
  identity: IdentityOf,
  options: { agent?: string } = {},
): SessionRef[] {
  const out: SessionRef[] = [];
  const only = options.agent;
  const keep = (names: string[]) => only === undefined ? names : names.filter((n) => n === only);
  const perUid = (top: string, scope: "private" | "temp", agents: (uid: string) => string) => {
    for (const u of dirNames(top)) {
      if (!/^(0|[1-9][0-9]{0,9})$/.test(u)) continue;
      const uid = Number(u);
      const nobody = { uid, gid: NOGROUP, groups: [] };
      for (const agent of keep(asOwner(nobody, () => dirNames(agents(u))))) {
        const o = identity(agent, uid) ?? nobody;
        out.push(...sessionsOf({ root, run, agent, session: "", scope, ...o, uid }));
      }
    }
  };
  perUid(`${root}/home`, "private", (u) => `${root}/home/${u}/agent`);
  for (const agent of keep(dirNames(`${root}/shared/agents/agent`))) {
    const o = identity(agent);
    if (o) out.push(...sessionsOf({ root, run, agent, session: "", scope: "shared", ...o }));
  }
  perUid(`${run}/temp`, "temp", (u) => `${run}/temp/${u}`);
  return out;
}
