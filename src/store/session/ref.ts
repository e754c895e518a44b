/** Where a session lives and who owns it: the reference every session operation takes, the modes, and running as its owner. */
import type { Scope } from "../../abi/frames.ts";
import { sessionBase } from "../../abi/layout.ts";
import { asUser } from "../../sys/fsid.ts";
import { HISTORY_MAX } from "../jsonl.ts";

export { sessionBase };

/** Every session file is read with the history bound: a planted sparse file is EFBIG, never read. */
export const BOUND = { limit: HISTORY_MAX };

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

export const DIR_MODE = { private: 0o700, shared: 0o770, temp: 0o700 } as const;
export const FILE_MODE = { private: 0o600, shared: 0o660, temp: 0o600 } as const;
/** Mode of `home/<uid>` and `<run>/temp/<uid>`: private to the uid (the mount shows it as is). */
export const HOME_MODE = 0o700;
/** Mode of an agent home `home/<uid>/agent/<a>` (the sandbox binds it as HOME). */
export const AGENT_HOME_MODE = 0o700;

/** Runs `fn` as the session's owner (filesystem identity); `fn` must be synchronous. */
export function asOwner<T>(o: Owner, fn: () => T): T {
  return asUser({ uid: o.uid, gid: o.gid, groups: o.groups ?? [] }, fn);
}
