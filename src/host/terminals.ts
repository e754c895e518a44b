/** The supervised agent terminals: `ctx agent start` materializes a session's ctxterm unit (receipt before release), `ctx agent stop` ends it by its receipt, host start reaps what a killed host left. */
import { type ChildProcess, spawn } from "node:child_process";
import { CtxError, ignore } from "../abi/errno.ts";
import { ensureDir } from "../store/atomic.ts";
import { loadAgent } from "../store/agent.ts";
import { openSession } from "../store/session/files.ts";
import { type Owner, sessionRef } from "../store/session/ref.ts";
import { logTail, readyOf, terminalArgv } from "../term/launch.ts";
import { asUser } from "../sys/fsid.ts";
import { answersUnix } from "../sys/listen.ts";
import { rotate, ROTATE_BYTES } from "../runtime/log.ts";
import { aliasPath, newTerminalId, sessionDir, userSocket } from "../term/locate.ts";
import {
  dropReceipt,
  type InstanceReceipt,
  reapReceipts,
  receiptOf,
  type Stopped,
  stopVerified,
  terminalUnit,
  writeReceipt,
} from "./receipt.ts";

/** The fd a supervised ctxterm gets its workspace on (`--workspace-fd`). */
export const WORKSPACE_FD = 3;

/** `<run>/terminal`: receipts `<agent>/<session>.json`, sockets `<agent>/<session>/main.sock`. */
export function terminalsDir(run: string): string {
  return `${run}/terminal`;
}

/** One supervised terminal as `status`/`ps` report it. */
export interface TerminalInfo {
  agent: string;
  session: string;
  id: string;
  /** `starting` (held, or not yet listening), `running`, `stopping`. */
  state: "starting" | "running" | "stopping";
  pid: number;
  /** Who may watch and attach besides root (the uid that started it). */
  owner: number;
  socket: string;
  alias: string;
  /** The resource directory `home/<uid>/agent/<a>/session/<s>/terminal/<id>`. */
  dir: string;
  receipt: InstanceReceipt;
}

/** A session's terminal to start: who asked and where they stand (an fd the host opened). */
export interface TerminalRequest {
  agent: string;
  session: string;
  /** The requester's uid (SO_PEERCRED): the terminal's owner. */
  uid: number;
  /** The requester's cwd, an O_PATH directory fd the host opened from `/proc/<pid>/cwd`. */
  workspace: number;
}

/**
 * Terminals (root ctxterm processes) one uid other than root may have live or starting, across
 * every agent it owns; one more is refused EAGAIN.
 */
export const MAX_TERMINALS_PER_UID = 8;

/** What {@link startTerminals} needs. */
export interface TerminalsOptions {
  root: string;
  run: string;
  /** The argv prefix that runs ctxterm (src/term/launch.ts `ctxtermCommand`). */
  command: string[];
  graceMs: number;
  /** ctxterm's environment (CORTEXFS_RUN is set to `run`: its sandbox hides it). */
  env?: Record<string, string>;
  /** The agent's log (the host's one writer). */
  log?: (agent: string, line: string) => void;
  /** A terminal's log past this many bytes is rotated to `.1` before its next start. */
  logBytes?: number;
}

/** The running terminal supervisor. */
export interface Terminals {
  /** Starts the session's terminal unless one lives (`already`); resolves once it listens. */
  start(req: TerminalRequest): Promise<{ terminal: TerminalInfo; already: boolean }>;
  /** Stops every terminal of `agent` as its receipt allows. */
  stop(agent: string): Promise<{ session: string; id: string; pid: number; result: Stopped }[]>;
  /** Live terminals (of one agent), by session. */
  list(agent?: string): TerminalInfo[];
  /** Receipts a killed host left: `<agent>/<session>` stopped (still live) or cleared (stale). */
  readonly reaped: { stopped: string[]; stale: string[] };
  /** Stops every terminal (the host is closing). */
  close(): Promise<void>;
}

interface Live {
  info: TerminalInfo;
  child: ChildProcess;
  exited: Promise<void>;
  file: string;
}

/** Stops what a killed host left under `top` (each agent's receipts), as their receipts prove. */
async function reapLeft(top: string, graceMs: number) {
  const reaped = { stopped: [] as string[], stale: [] as string[] };
  for (const e of Deno.readDirSync(top)) {
    if (!e.isDirectory) continue;
    await reapReceipts(`${top}/${e.name}`, {
      graceMs,
      onReaped: (_agent, live, r) =>
        (live ? reaped.stopped : reaped.stale).push(`${r.agent}/${r.session ?? ""}`),
    });
  }
  return reaped;
}

/**
 * True when a user-started terminal (`ctx terminal create`) serves the session: only its own
 * known socket is tried, and as the agent identity `who`: every component of that path, the alias
 * among them, is the identity's to write, so root's own authority must never resolve or connect it
 * (a symlink there would reach a socket only root may, and wake its server).
 */
function userHolds(alias: string, user: string, who: Owner): boolean {
  return asUser({ ...who, groups: who.groups ?? [] }, () => {
    try {
      return Deno.readLinkSync(alias) === user && answersUnix(user) === 0;
    } catch (e) {
      ignore(
        e,
        Deno.errors.NotFound,
        "EINVAL",
        Deno.errors.NotADirectory,
        Deno.errors.PermissionDenied,
      );
      return false; // no alias
    }
  });
}

/**
 * Spawns a unit in its own session and group (setsid), detached from the host; stderr appended to
 * `$CTXTERM_LOG` (a file, so a host gone leaves it nothing to block on); `workspace` as fd 3.
 */
function spawnUnit(argv: string[], workspace: number, env: Record<string, string>) {
  const child = spawn("/bin/sh", ["-c", 'exec "$@" 2>>"$CTXTERM_LOG"', "sh", ...argv], {
    stdio: ["pipe", "pipe", "ignore", workspace],
    detached: true,
    cwd: "/",
    env,
  });
  const exit = Promise.withResolvers<void>();
  child.on("exit", () => exit.resolve());
  child.on("error", () => exit.resolve());
  child.stdin?.on("error", () => {/* it exited first: the exit event tells */});
  return { child, exit };
}

/**
 * The unit's run-dir places: `<top>/<agent>` (0711: owners reach their sockets through it), its
 * socket and its log. ctxterm appends its stderr (its own diagnostics only: the shell writes to
 * the PTY) across starts; each start past the limit begins a new file, the previous one `.1`.
 */
function unitPaths(top: string, agent: string, session: string, logBytes?: number) {
  const base = `${top}/${agent}`;
  ensureDir(base, 0o711);
  Deno.chmodSync(base, 0o711);
  const log = `${base}/${session}.log`;
  rotate(log, { limit: logBytes ?? ROTATE_BYTES });
  return { base, socket: `${base}/${session}/main.sock`, log };
}

/** The unit's first stdout line (its ready line), or all it wrote before it exited. */
function firstLine(child: ChildProcess, exited: Promise<void>): Promise<string> {
  let text = "";
  child.stdout?.setEncoding("utf8");
  return new Promise<string>((resolve) => {
    child.stdout?.on("data", (c: string) => {
      text += c;
      if (text.includes("\n")) resolve(text.slice(0, text.indexOf("\n")));
    });
    void exited.then(() => resolve(text));
  });
}

/**
 * Starts the terminal supervisor: first every receipt under `<run>/terminal/<agent>/` a killed
 * host left is verified and its still-live terminal stopped (SIGTERM: ctxterm records
 * `process.exit`), a stale one (pid gone or reused) cleared without a signal.
 */
export async function startTerminals(o: TerminalsOptions): Promise<Terminals> {
  const top = terminalsDir(o.run);
  ensureDir(top, 0o711);
  Deno.chmodSync(top, 0o711); // the owners reach their sockets through it; nobody lists it
  return new Units(o, top, await reapLeft(top, o.graceMs));
}

const key = (agent: string, session: string) => `${agent}/${session}`;

/** The live supervisor: one unit per agent session, started once, stopped by its receipt. */
class Units implements Terminals {
  readonly #lives = new Map<string, Live>();
  readonly #starting = new Map<string, Promise<{ terminal: TerminalInfo; already: boolean }>>();
  /** Terminals being started, by owner uid. */
  readonly #startingBy = new Map<number, number>();

  readonly #o: TerminalsOptions;
  readonly #top: string;

  constructor(o: TerminalsOptions, top: string, readonly reaped: Terminals["reaped"]) {
    this.#o = o;
    this.#top = top;
  }

  start(req: TerminalRequest): Promise<{ terminal: TerminalInfo; already: boolean }> {
    const k = key(req.agent, req.session);
    const have = this.#lives.get(k);
    if (have && have.info.state !== "stopping") {
      return Promise.resolve({ terminal: have.info, already: true });
    }
    const pending = this.#starting.get(k);
    if (pending) return pending.then((r) => ({ ...r, already: true }));
    // A new one: each is a root ctxterm, so a uid other than root has a bounded number.
    if (req.uid !== 0) {
      const mine = [...this.#lives.values()].filter((l) => l.info.owner === req.uid).length +
        (this.#startingBy.get(req.uid) ?? 0);
      if (mine >= MAX_TERMINALS_PER_UID) {
        return Promise.reject(
          new CtxError(
            "EAGAIN",
            `uid ${req.uid} already has ${MAX_TERMINALS_PER_UID} terminals; stop one first`,
          ),
        );
      }
    }
    this.#startingBy.set(req.uid, (this.#startingBy.get(req.uid) ?? 0) + 1);
    const p = (async () => {
      if (have) await have.exited; // a stop is under way: the new one follows it
      return { terminal: await this.#spawn(req), already: false };
    })();
    this.#starting.set(k, p);
    return p.finally(() => {
      this.#starting.delete(k);
      const n = (this.#startingBy.get(req.uid) ?? 1) - 1;
      if (n > 0) this.#startingBy.set(req.uid, n);
      else this.#startingBy.delete(req.uid);
    });
  }

  async stop(
    agent: string,
  ): Promise<{ session: string; id: string; pid: number; result: Stopped }[]> {
    const mine = [...this.#lives.values()].filter((l) => l.info.agent === agent);
    return await Promise.all(mine.map(async (l) => ({
      session: l.info.session,
      id: l.info.id,
      pid: l.info.pid,
      result: await this.#stopLive(l),
    })));
  }

  list(agent?: string): TerminalInfo[] {
    const all = [...this.#lives.values()].map((l) => l.info);
    return all.filter((i) => agent === undefined || i.agent === agent).sort((a, b) =>
      key(a.agent, a.session).localeCompare(key(b.agent, b.session))
    );
  }

  async close() {
    await Promise.all([...this.#starting.values()].map((p) => p.catch(() => {})));
    await Promise.all([...this.#lives.values()].map((l) => this.#stopLive(l)));
  }

  async #spawn(req: TerminalRequest): Promise<TerminalInfo> {
    const root = this.#o.root;
    const agent = loadAgent(root, req.agent, { secrets: false });
    // The session lives in the agent identity's home, where `ctx agent watch|attach` look.
    const place = { root, uid: agent.uid, agent: agent.name, session: req.session };
    openSession(sessionRef({
      root,
      run: this.#o.run,
      agent: agent.name,
      session: req.session,
      scope: "private",
      uid: agent.uid,
      gid: agent.gid,
      groups: agent.groups,
    }));
    const alias = aliasPath(place);
    // A user-started terminal serving this session keeps it.
    const user = userSocket(place, {});
    if (userHolds(alias, user, { uid: agent.uid, gid: agent.gid, groups: agent.groups })) {
      throw new CtxError(
        "EBUSY",
        `session "${req.session}" of agent ${agent.name} has a live terminal the host did not start`,
        { path: user },
      );
    }
    const { base, socket, log } = unitPaths(this.#top, agent.name, req.session, this.#o.logBytes);
    const id = newTerminalId();
    const dir = `${sessionDir(place)}/terminal/${id}`;
    const argv = [
      ...this.#o.command,
      ...terminalArgv({
        socket,
        alias,
        dir,
        id,
        agent: agent.name,
        session: req.session,
        owner: req.uid,
        uid: req.uid,
        root,
        workspace: { fd: WORKSPACE_FD },
        hold: true,
      }),
    ];
    const { child, exit } = spawnUnit(argv, req.workspace, {
      ...(this.#o.env ?? Deno.env.toObject()),
      CORTEXFS_RUN: this.#o.run,
      CTXTERM_LOG: log,
    });
    const pid = child.pid ?? 0;
    const receipt = pid > 0
      ? receiptOf(agent.name, pid, {
        uid: Deno.uid() ?? 0,
        unit: terminalUnit(agent.name, req.session),
      })
      : undefined;
    if (!receipt) {
      child.stdin?.end();
      await exit.promise;
      throw new CtxError("EIO", `ctxterm for ${agent.name}/${req.session} did not start`);
    }
    receipt.session = req.session;
    receipt.terminal = id;
    receipt.owner = req.uid;
    const file = writeReceipt(base, receipt, req.session);
    const info: TerminalInfo = {
      agent: agent.name,
      session: req.session,
      id,
      state: "starting",
      pid,
      owner: req.uid,
      socket,
      alias,
      dir,
      receipt,
    };
    const live: Live = {
      info,
      child,
      file,
      exited: exit.promise.then(() => {
        if (this.#lives.get(key(agent.name, req.session)) === live) {
          this.#lives.delete(key(agent.name, req.session));
        }
        this.#o.log?.(agent.name, `cortexfsd: terminal ${req.session} ${id} pid ${pid} exited\n`);
        dropReceipt(file); // last, as for instances: the log line is there once it is gone
      }),
    };
    this.#lives.set(key(agent.name, req.session), live);
    this.#o.log?.(
      agent.name,
      `cortexfsd: terminal.start unit=${receipt.unit} invocation=${receipt.invocation} pid=${pid} session=${req.session} id=${id}\n`,
    );
    // Released only now: the receipt is on disk.
    child.stdin?.end("go\n");
    if (!readyOf(await firstLine(child, exit.promise))) {
      // A unit that answered something else but this.#lives on would hold this start forever: stop it
      // as its receipt proves, then say why.
      await stopVerified(receipt, { graceMs: this.#o.graceMs, exited: live.exited });
      await live.exited;
      const why = logTail(log);
      throw new CtxError("EIO", `ctxterm did not start${why ? `: ${why}` : ""}`, { path: log });
    }
    info.state = "running";
    return info;
  }

  async #stopLive(live: Live): Promise<Stopped> {
    live.info.state = "stopping";
    const result = await stopVerified(live.info.receipt, {
      graceMs: this.#o.graceMs,
      exited: live.exited,
    });
    if (result !== "stale") await live.exited;
    else {
      // Nothing proven: forget it, signal nothing (its exit event, if any, still cleans up).
      this.#lives.delete(key(live.info.agent, live.info.session));
      dropReceipt(live.file);
    }
    return result;
  }
}
