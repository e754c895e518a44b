/** Terminal resources recorded in a tree (`.../session/<s>/terminal/<id>/meta.json`), read as data: the list, and the user runtime dirs their sockets live in. */
import { ignore } from "../abi/errno.ts";
import { sessionBase } from "../abi/layout.ts";
import { type TerminalMeta, terminalMeta } from "../abi/terminal.ts";
import { readRegularText } from "./regular.ts";

/** A terminal resource found on disk. */
export interface Found {
  dir: string;
  meta: TerminalMeta;
}

export function readMeta(dir: string): TerminalMeta | null {
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

/**
 * The user runtime dirs (`<base>/cortexfs`) where terminals of `uids` listen or will: each uid's
 * default `/run/user/<uid>/cortexfs`, and the base of every user runtime socket a terminal of
 * theirs in the tree recorded (a `$XDG_RUNTIME_DIR` elsewhere: in a home, a workspace). No
 * sandbox view may show them (prepareView hides them): a tool of the same uid could otherwise
 * reach another agent's terminal.
 */
export function runtimeDirs(root: string, uids: readonly number[]): string[] {
  const out = new Set<string>();
  for (const uid of new Set(uids)) {
    out.add(`/run/user/${uid}/cortexfs`);
    for (const f of listTerminals(root, uid)) {
      const m = /^(\/.*)\/cortexfs\/terminal\/[^/]+\/[^/]+\/main\.sock$/.exec(f.meta.socket);
      if (m && !m[1].split("/").includes("..")) out.add(`${m[1]}/cortexfs`);
    }
  }
  return [...out];
}
