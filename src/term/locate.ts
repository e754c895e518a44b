/** Where a session's terminals live: resource dirs, the ABI socket alias, the user runtime socket, and the resolution order between them. */
import { CtxError, ignore } from "../abi/errno.ts";
import { sessionBase } from "../abi/layout.ts";
import { parseTerminalEvents, type TerminalEvent, terminalMeta } from "../abi/terminal.ts";
import type { TerminalMeta } from "../abi/terminal.ts";
import { readRegularText } from "../store/regular.ts";
import { connect, type TermConn, WrongServer } from "./client.ts";

/** One agent session of one uid in a tree. */
export interface SessionPlace {
  /** Host path of the tree (CTX_ROOT). */
  root: string;
  uid: number;
  agent: string;
  session: string;
}

/** The session directory `home/<uid>/agent/<agent>/session/<session>`. */
export function sessionDir(p: SessionPlace): string {
  return `${sessionBase({ ...p, run: "", scope: "private" })}/${p.session}`;
}

/** The ABI alias of the session's live terminal socket: `.../session/<s>/terminal/main.sock`. */
export function aliasPath(p: SessionPlace): string {
  return `${sessionDir(p)}/terminal/main.sock`;
}

/**
 * The user runtime socket `/run/user/<uid>/cortexfs/terminal/<agent>/<session>/main.sock`
 * (`$XDG_RUNTIME_DIR` stands for `/run/user/<uid>` when set: tests and non-systemd hosts).
 */
export function userSocket(
  p: Omit<SessionPlace, "root">,
  env: Record<string, string | undefined>,
): string {
  const base = env.XDG_RUNTIME_DIR || `/run/user/${p.uid}`;
  return `${base}/cortexfs/terminal/${p.agent}/${p.session}/main.sock`;
}

/** A fresh terminal id: `t-<UTC yyyymmddThhmmss>-<4 hex>` (sortable, one path component). */
export function newTerminalId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "");
  const rand = crypto.getRandomValues(new Uint16Array(1))[0].toString(16).padStart(4, "0");
  return `t-${stamp}-${rand}`;
}

/**
 * The live terminal of a session, connected and its server checked ({@link connect}: root or a
 * uid of `servers`): `first` (the host's run-dir socket of a supervised terminal, which no user can
 * replace), then the seed's order, the ABI alias, then the user runtime path; the first that
 * accepts a connection wins. One served by another uid is EACCES at once, never passed over: the
 * alias was pointed somewhere else. None: EHOSTDOWN (exit 69) naming them.
 */
export async function resolveSocket(
  p: SessionPlace,
  env: Record<string, string | undefined>,
  options: { servers?: readonly number[]; first?: string[] } = {},
): Promise<{ path: string; conn: TermConn }> {
  const tried = [...(options.first ?? []), aliasPath(p), userSocket(p, env)];
  const servers = options.servers ?? [Deno.uid() ?? 0, p.uid];
  for (const path of tried) {
    try {
      return { path, conn: await connect(path, servers) };
    } catch (e) {
      if (e instanceof WrongServer) throw e;
    }
  }
  throw new CtxError(
    "EHOSTDOWN",
    `no live terminal socket for agent "${p.agent}" session "${p.session}" (tried ${
      tried.join(", ")
    }): start one with \`ctx terminal create ${p.agent} --session ${p.session}\``,
    { path: tried[0] },
  );
}

/** A terminal resource found on disk. */
export interface Found {
  dir: string;
  meta: TerminalMeta;
}

function readMeta(dir: string): TerminalMeta | null {
  try {
    // A regular file only (never a FIFO to block on, never a followed symlink).
    const text = readRegularText(`${dir}/meta.json`);
    if (text === undefined) return null;
    const r = terminalMeta.safeParse(JSON.parse(text));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

function names(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].filter((e) => e.isDirectory && !e.name.startsWith("."))
      .map((e) => e.name).sort();
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory);
    return [];
  }
}

/** Every terminal resource of `uid` in the tree (optionally one agent, one session), oldest id first. */
export function listTerminals(
  root: string,
  uid: number,
  filter: { agent?: string; session?: string } = {},
): Found[] {
  const out: Found[] = [];
  const agents = filter.agent ? [filter.agent] : names(`${root}/home/${uid}/agent`);
  for (const agent of agents) {
    const base = sessionBase({ root, run: "", uid, agent, scope: "private" });
    const sessions = filter.session ? [filter.session] : names(base);
    for (const session of sessions) {
      for (const id of names(`${base}/${session}/terminal`)) {
        const dir = `${base}/${session}/terminal/${id}`;
        const meta = readMeta(dir);
        if (meta) out.push({ dir, meta });
      }
    }
  }
  return out;
}

/** The terminal named `ref`: a resource directory path, or an id among `uid`'s terminals. */
export function findTerminal(root: string, uid: number, ref: string): Found {
  if (ref.includes("/")) {
    const meta = readMeta(ref);
    if (meta) return { dir: ref.replace(/\/+$/, ""), meta };
    throw new CtxError("ENOENT", "not a terminal resource directory (no valid meta.json)", {
      path: ref,
    });
  }
  const hits = listTerminals(root, uid).filter((f) => f.meta.id === ref);
  if (hits.length === 1) return hits[0];
  if (hits.length === 0) {
    throw new CtxError("ENOENT", `no terminal "${ref}" in home/${uid}`, { path: ref });
  }
  throw new CtxError(
    "EINVAL",
    `terminal id "${ref}" is ambiguous: ${hits.map((h) => h.dir).join(", ")}`,
  );
}

/** A terminal's recorded events; a torn last line (a crash mid-write) is left out and flagged. */
export function readTerminalEvents(dir: string): { events: TerminalEvent[]; torn: boolean } {
  const path = `${dir}/events.jsonl`;
  const text = readRegularText(path);
  if (text === undefined) return { events: [], torn: false };
  try {
    return parseTerminalEvents(text);
  } catch (e) {
    throw new CtxError("EIO", (e as Error).message, { path });
  }
}
