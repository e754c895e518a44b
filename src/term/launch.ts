/**
 * `ctx terminal create`: makes the session, picks the terminal id and paths, and starts ctxterm
 * detached (its own session, stdin /dev/null, stderr to a log beside the socket). This is the
 * seam for the built-in supervisor: {@link Starter} is the one place that starts the process,
 * and a supervisor that records a launch receipt replaces {@link detachedStarter}.
 */
import { CtxError } from "../abi/errno.ts";
import { loadAgent } from "../store/agent.ts";
import { openSession, sessionRef } from "../store/session.ts";
import { resolvePaths } from "../store/paths.ts";
import { aliasPath, newTerminalId, sessionDir, userSocket } from "./locate.ts";

/** What {@link createTerminal} needs. */
export interface CreateOptions {
  root: string;
  /** The caller's uid: the terminal's owner (who may watch and attach, besides root). */
  uid: number;
  agent: string;
  session: string;
  /** Host directory bound at /workspace. */
  workspace: string;
  env: Record<string, string | undefined>;
  /** How ctxterm is started (default {@link detachedStarter}). */
  starter?: Starter;
}

/** The ctxterm run a starter launches, already decided: argv, log, where it will listen. */
export interface TerminalUnit {
  id: string;
  /** The full command line (ctxterm and its arguments). */
  argv: string[];
  /** Where its stderr goes. */
  log: string;
  /** Its working directory (the workspace: ctxterm opens it for the sandbox). */
  cwd: string;
}

/** Starts a {@link TerminalUnit}; resolves once its socket listens (ctxterm's ready line). */
export type Starter = (
  unit: TerminalUnit,
) => Promise<{ pid: number; socket: string; child: number }>;

/** The result of {@link createTerminal}. */
export interface Created {
  id: string;
  dir: string;
  socket: string;
  alias: string;
  pid: number;
}

const repo = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/**
 * How to run ctxterm: `$CTXTERM`, else this checkout's cli/ctxterm.ts under this deno, else a
 * `ctxterm` beside this executable (dist/bin), else `ctxterm` on PATH.
 */
export function ctxtermCommand(env: Record<string, string | undefined>): string[] {
  if (env.CTXTERM) return [env.CTXTERM];
  const entry = `${repo}/cli/ctxterm.ts`;
  try {
    if (Deno.statSync(entry).isFile) return [Deno.execPath(), "run", "--allow-all", entry];
  } catch { /* a compiled binary */ }
  const dir = Deno.execPath().slice(0, Deno.execPath().lastIndexOf("/"));
  try {
    if (Deno.statSync(`${dir}/ctxterm`).isFile) return [`${dir}/ctxterm`];
  } catch { /* not installed beside us */ }
  return ["ctxterm"];
}

/**
 * Starts ctxterm in a session of its own (setsid; it outlives this process), stdin /dev/null,
 * stderr appended to the unit's log, stdout read until its one ready line. No receipt is
 * recorded: this is a user-started terminal (the seed's `/run/user/<uid>` case).
 */
export const detachedStarter: Starter = async (unit) => {
  const script = `exec setsid "$@" </dev/null 2>>"$CTXTERM_LOG"`;
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", script, "ctxterm", ...unit.argv],
    cwd: unit.cwd,
    env: { CTXTERM_LOG: unit.log },
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  let text = "";
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    text += new TextDecoder().decode(r.value);
    if (text.includes("\n")) break;
  }
  reader.releaseLock();
  await child.stdout.cancel().catch(() => {});
  child.unref();
  const line = text.split("\n")[0];
  try {
    const ready = JSON.parse(line) as {
      ready: boolean;
      pid: number;
      socket: string;
      child: number;
    };
    if (ready.ready) return { pid: ready.pid, socket: ready.socket, child: ready.child };
  } catch { /* not ready: the log says why */ }
  let why = "";
  try {
    why = Deno.readTextFileSync(unit.log).trim().split("\n").slice(-3).join(" | ");
  } catch { /* no log */ }
  throw new CtxError("EIO", `ctxterm did not start${why ? `: ${why}` : ""}`, { path: unit.log });
};

/**
 * Creates and starts AGENT's terminal for `session`: the session directory (as the agent's
 * identity), the resource `session/<s>/terminal/<id>/`, the live socket under the user runtime
 * dir and its ABI alias `session/<s>/terminal/main.sock`; ctxterm runs interactive tsh in the
 * agent's sandbox. Refused (EBUSY) while the session already has a live terminal.
 */
export async function createTerminal(o: CreateOptions): Promise<Created> {
  const root = Deno.realPathSync(o.root);
  const agent = loadAgent(root, o.agent, { secrets: false });
  const ref = sessionRef({
    root,
    run: resolvePaths({ env: o.env }).run,
    agent: agent.name,
    session: o.session,
    scope: "private",
    uid: agent.uid,
    gid: agent.gid,
    groups: agent.groups,
  });
  openSession(ref);
  const place = { root, uid: agent.uid, agent: agent.name, session: o.session };
  const socket = userSocket(place, o.env);
  const alias = aliasPath(place);
  const { resolveSocket } = await import("./locate.ts");
  const busy = await resolveSocket(place, o.env).catch(() => null);
  if (busy) {
    throw new CtxError("EBUSY", `session "${o.session}" already has a live terminal`, {
      path: busy,
    });
  }
  const id = newTerminalId();
  const dir = `${sessionDir(place)}/terminal/${id}`;
  const log = `${socket.slice(0, socket.lastIndexOf("/"))}/ctxterm.log`;
  Deno.mkdirSync(log.slice(0, log.lastIndexOf("/")), { recursive: true, mode: 0o700 });
  const workspace = Deno.realPathSync(o.workspace);
  const argv = [
    ...ctxtermCommand(o.env),
    "--listen",
    socket,
    "--alias",
    alias,
    "--record",
    dir,
    "--id",
    id,
    "--agent",
    agent.name,
    "--session",
    o.session,
    "--owner",
    String(o.uid),
    "--ready",
    "--sandbox",
    agent.name,
    "--root",
    root,
    "--uid",
    String(o.uid),
    "--workspace",
    workspace,
  ];
  const started = await (o.starter ?? detachedStarter)({ id, argv, log, cwd: workspace });
  return { id, dir, socket: started.socket, alias, pid: started.pid };
}
