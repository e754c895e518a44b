/** The directories above a session: root's claims given to an owner (checked, never followed), the session base and agent homes made level by level as their owners. */
import { CtxError, toCtxError } from "../../abi/errno.ts";
import type { Scope } from "../../abi/frames.ts";
import { currentFsId } from "../../sys/fsid.ts";
import { syncDir } from "../atomic.ts";
import {
  AGENT_HOME_MODE,
  asOwner,
  DIR_MODE,
  HOME_MODE,
  type Owner,
  type SessionRef,
  sessionRef,
} from "./ref.ts";

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
export function prepareBase(ref: SessionRef): void {
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
