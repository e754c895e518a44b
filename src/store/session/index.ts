/** The session index of a session base (`index/list`, `index/current`, `by-cwd`) and finding every session of an agent. */
import { ignore } from "../../abi/errno.ts";
import { replaceFile } from "../atomic.ts";
import { readRegularText } from "../regular.ts";
import { mkdirOnce } from "./claim.ts";
import {
  asOwner,
  BOUND,
  DIR_MODE,
  FILE_MODE,
  type LocateOptions,
  type Owner,
  type SessionRef,
  sessionRef,
} from "./ref.ts";

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
