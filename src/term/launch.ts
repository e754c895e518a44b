/**
 * `ctx terminal create`: makes the session, picks the terminal id and paths, and starts ctxterm
 * detached (its own session, stdin /dev/null, stderr to a log beside the socket). This is the
 * seam of the built-in supervisor: {@link Starter} is the one place that starts the process here;
 * `ctx agent start` has the host start a supervised one instead (src/host/terminals.ts, with a
 * receipt), from the same {@link terminalArgv}.
 */
import { CtxError, ignore } from "../abi/errno.ts";
import { readyLine } from "../abi/terminal.ts";
import { loadAgent } from "../store/agent.ts";
import { openSession } from "../store/session/files.ts";
import { sessionRef } from "../store/session/ref.ts";
import { resolvePaths } from "../store/paths.ts";
import { programArgv, self } from "../program/self.ts";
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

/**
 * How to run ctxterm: `$CTXTERM`, else this install's own ctxterm (src/program/self.ts: the pinned
 * deno on the checkout's cli/ctxterm.ts, or on the built single file's bundle), else a `ctxterm`
 * beside a compiled executable, else `ctxterm` on PATH.
 */
export function ctxtermCommand(env: Record<string, string | undefined>): string[] {
  if (env.CTXTERM) return [env.CTXTERM];
  const install = self(env);
  if (!Deno.build.standalone && install.programs.includes("ctxterm")) {
    return programArgv(install, "ctxterm");
  }
  const dir = Deno.execPath().slice(0, Deno.execPath().lastIndexOf("/"));
  try {
    if (Deno.statSync(`${dir}/ctxterm`).isFile) return [`${dir}/ctxterm`];
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* not installed beside us */
  }
  return ["ctxterm"];
}

/** Where and as what one agent terminal runs: the arguments {@link terminalArgv} builds. */
export interface TerminalArgs {
  socket: string;
  alias: string;
  /** The resource directory `session/<s>/terminal/<id>`. */
  dir: string;
  id: string;
  agent: string;
  session: string;
  /** Who may watch and attach besides root. */
  owner: number;
  /** The uid whose home holds the agent home (`home/<uid>/agent/<agent>`). */
  uid: number;
  root: string;
  /** A host directory, or `{fd}`: an fd the starter hands ctxterm (`--workspace-fd`). */
  workspace: string | { fd: number };
  /** Wait for the supervisor's `go` line before anything (`--hold`). */
  hold?: boolean;
}

/** ctxterm's arguments (after its command) for interactive tsh in the agent's sandbox. */
export function terminalArgv(a: TerminalArgs): string[] {
  return [
    "--listen",
    a.socket,
    "--alias",
    a.alias,
    "--record",
    a.dir,
    "--id",
    a.id,
    "--agent",
    a.agent,
    "--session",
    a.session,
    "--owner",
    String(a.owner),
    "--ready",
    ...(a.hold ? ["--hold"] : []),
    "--sandbox",
    a.agent,
    "--root",
    a.root,
    "--uid",
    String(a.uid),
    ...(typeof a.workspace === "string"
      ? ["--workspace", a.workspace]
      : ["--workspace-fd", String(a.workspace.fd)]),
  ];
}

/** Parses ctxterm's one ready line (`--ready`); null for anything else. */
export function readyOf(line: string): { pid: number; socket: string; child: number } | null {
  try {
    const r = readyLine.safeParse(JSON.parse(line));
    return r.success ? { pid: r.data.pid, socket: r.data.socket, child: r.data.child } : null;
  } catch {
    return null;
  }
}

/** The last lines of a ctxterm log, for an error message ("" when none). */
export function logTail(log: string): string {
  try {
    return Deno.readTextFileSync(log).trim().split("\n").slice(-3).join(" | ");
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return "";
  }
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
  const ready = readyOf(text.split("\n")[0]);
  if (ready) return ready;
  const why = logTail(unit.log); // not ready: the log says why
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
  const { WrongServer } = await import("./client.ts");
  // Any server answering there makes the session busy (ours or not: it is not ours to replace).
  const busy = await resolveSocket(place, o.env).then(
    (r) => (r.conn.close(), r.path),
    (e) => e instanceof WrongServer ? e.path ?? aliasPath(place) : null,
  );
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
    ...terminalArgv({
      socket,
      alias,
      dir,
      id,
      agent: agent.name,
      session: o.session,
      owner: o.uid,
      uid: o.uid,
      root,
      workspace,
    }),
  ];

  const started = await (o.starter ?? detachedStarter)({ id, argv, log, cwd: workspace });
  return { id, dir, socket: started.socket, alias, pid: started.pid };
}
