/** The supervisor: owns every agent's listening socket, starts one instance per agent on demand (itself, or as a systemd transient scope where a manager answers), records receipts before releasing it, stops only what a receipt proves. */
import { CtxError, ERRNO, ignore, toCtxError } from "../abi/errno.ts";
import { encodeFrame, errorOf } from "../abi/frames.ts";
import { ensureDir } from "../store/atomic.ts";
import { readRegularText } from "../store/regular.ts";
import { acceptWaiting, answerClose, closeFd, listenUnix, refuseWaiting } from "../sys/listen.ts";
import { peerCred } from "../sys/sock.ts";
import { Activator } from "./activator.ts";
import { admitUid, ownerOf } from "../runtime/admit.ts";
import { groupsDir, reapGroups } from "../runtime/groups.ts";
import { dropArgv } from "./caps.ts";
import { Presence } from "../runtime/presence.ts";
import {
  type InstanceReceipt,
  type ReapedInstances,
  reapReceipts,
  receiptsDir,
  type Stopped,
} from "./receipt.ts";
import { type Manager, stopperOf } from "./systemd.ts";
import { linkAlias } from "../runtime/server.ts";
import { type Live, type SpawnContext, spawnInstance } from "./spawn.ts";
import {
  startTerminals,
  type TerminalInfo,
  type TerminalRequest,
  type Terminals,
} from "./terminals.ts";

/** How long a stopped instance has between SIGTERM and SIGKILL. */
export const STOP_GRACE_MS = 5_000;
/** Default idle timeout of an instance (seconds). */
export const IDLE_SECONDS = 300;
/** Default start timeout of an instance (seconds): from its release to its `ready` line. */
export const START_SECONDS = 30;

/**
 * Connections the host takes from one idle agent's backlog per wake of its activator: more wait
 * for the next poll, which returns at once, so a flooded socket shares the host's loop with the
 * rest (every wake does this much work at most, and at least one accept: no spin).
 */
export const ADMIT_BATCH = 32;
const ECONNABORTED = 103;
/**
 * Live or starting instances (each a root process) of the agents one uid owns that the uid may
 * start (by connecting, or `start` on control.sock): one more is refused EAGAIN. Root starts any.
 */
export const MAX_INSTANCES_PER_UID = 16;

/** Options for {@link startSupervisor}. */
export interface SupervisorOptions {
  root: string;
  run: string;
  mount?: string;
  /** The argv that runs `cortexfsd instance` (the agent name and flags are appended). */
  command: string[];
  /** Idle timeout of every instance, seconds. */
  idleSeconds?: number;
  /**
   * Start timeout, seconds: an instance released this long ago that has not printed `ready` is
   * stopped by its receipt and recorded as failed (default {@link START_SECONDS}).
   */
  startSeconds?: number;
  /** SIGTERM-to-SIGKILL grace of a stop (ms). */
  graceMs?: number;
  /**
   * Rotation limit (bytes) of the host's logs: each agent's `<run>/log/<n>.log` and each
   * terminal's `<run>/terminal/<a>/<s>.log` (default src/runtime/log.ts `ROTATE_BYTES`).
   */
  logBytes?: number;
  /**
   * A systemd manager that answered (src/host/systemd.ts `detectManager`): instances run as
   * its transient scopes. Null or absent: the built-in supervisor.
   */
  manager?: Manager | null;
  /** The environment instances get (plus LISTEN_FDS/LISTEN_PID); default this process's. */
  env?: Record<string, string>;
  /**
   * The argv prefix that runs ctxterm (src/term/launch.ts `ctxtermCommand`): `start` with a
   * workspace also starts the session's supervised terminal. Absent: instances only.
   */
  terminal?: string[];
}

/** One agent as `ps`/`status` report it. */
export interface InstanceInfo {
  agent: string;
  /** `agent/<n>.d/status` as the instance (or the host) last wrote it. */
  state: string;
  pid: number | null;
  receipt: InstanceReceipt | null;
  /** The agent's live supervised terminals, by session. */
  terminals: TerminalInfo[];
}

/** How `stop` ended one terminal. */
export interface StoppedTerminal {
  session: string;
  id: string;
  pid: number;
  result: Stopped;
}

interface Slot {
  name: string;
  fd: number;
  path: string;
  live?: Live;
  starting?: Promise<Live>;
  /** The agent's owner as read at its instance's start (counted on its uid's cap). */
  owner?: number;
}

/** The running supervisor. */
export interface Supervisor {
  /** Creates (or keeps) `name`'s listening socket and arms it; no instance is started. */
  serve(name: string): Promise<string>;
  /** The definition is gone: its instance is stopped, its socket closed and removed. */
  unserve(name: string): Promise<void>;
  /**
   * Starts `name`'s instance unless one lives (`already`); resolves once it serves. For `uid`
   * other than 0: EAGAIN when it would pass {@link MAX_INSTANCES_PER_UID}.
   */
  start(name: string, uid?: number): Promise<{ receipt: InstanceReceipt; already: boolean }>;
  /**
   * Starts the session's supervised terminal unless one lives (`already`); resolves once it
   * listens. ENOTSUP without a ctxterm command.
   */
  startTerminal(req: TerminalRequest): Promise<{ terminal: TerminalInfo; already: boolean }>;
  /**
   * Stops `name`'s supervised terminals, then its instance, each as its receipt allows (`none`: no
   * instance).
   */
  stop(name: string): Promise<{
    result: Stopped | "none";
    receipt: InstanceReceipt | null;
    terminals: StoppedTerminal[];
  }>;
  status(name: string): InstanceInfo;
  /** Live instances. */
  ps(): InstanceInfo[];
  agents(): string[];
  /** What host start found in `<run>/instance` (a killed host's instances). */
  readonly reaped: ReapedInstances;
  /** What host start found in `<run>/terminal` (a killed host's terminals: `agent/session`). */
  readonly reapedTerminals: { stopped: string[]; stale: string[] };
  /** Ends every instance (stdin EOF: live runs interrupted), closes every socket. */
  close(): Promise<void>;
}

function agentNames(root: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${root}/agent`)) {
    if (!e.isFile || e.name.startsWith(".") || e.name.endsWith(".sock")) continue;
    out.push(e.name);
  }
  return out.sort();
}

function readTrim(path: string): string {
  try {
    return (readRegularText(path) ?? "").trim();
  } catch (e) {
    ignore(e, "EIO", "ELOOP");
    return "";
  }
}

/**
 * Starts the supervisor: reaps the receipts a killed host left (and their step groups), then
 * creates one listening socket per agent and waits on all of them with one poll. No per-agent
 * index, recovery or status work happens here: each instance does its own when it starts.
 */
export async function startSupervisor(o: SupervisorOptions): Promise<Supervisor> {
  const dirs = [["agent", 0o711], ["instance", 0o700], ["groups", 0o700], ["log", 0o700]] as const;
  for (const [d, mode] of dirs) {
    ensureDir(`${o.run}/${d}`, mode);
    Deno.chmodSync(`${o.run}/${d}`, mode);
  }
  const presence = new Presence(o.root, { logDir: `${o.run}/log`, logBytes: o.logBytes });
  const graceMs = o.graceMs ?? STOP_GRACE_MS;
  const manager = o.manager ?? null;
  const stop = stopperOf(manager);
  const reaped = await reapReceipts(receiptsDir(o.run), {
    graceMs,
    stop,
    onReaped: (agent) => presence.set(agent, "idle", null),
  });
  // What a killed host's agents left running, as one record in the host's log.
  console.error(
    `cortexfsd: reaped agent groups: ${JSON.stringify(await reapGroups(groupsDir(o.run)))}`,
  );
  const terms = await startTerminals({
    root: o.root,
    run: o.run,
    command: o.terminal ?? [],
    graceMs,
    env: o.env,
    logBytes: o.logBytes,
    log: (agent, line) => presence.log(agent, line),
  });
  // Resolved once: a root host without setpriv fails here, before it serves (an instance with
  // every capability is what this replaces, never a fallback).
  const drop = dropArgv({ uid: Deno.uid() });
  const host = new Host(o, terms, reaped, {
    root: o.root,
    run: o.run,
    mount: o.mount,
    command: o.command,
    idleSeconds: o.idleSeconds ?? IDLE_SECONDS,
    env: o.env,
    manager,
    graceMs,
    startSeconds: o.startSeconds ?? START_SECONDS,
    drop,
    presence,
    stop,
  });
  await host.boot();
  return host;
}

/** The supervisor's state: one slot per served agent, the activator, the terminals. */
class Host implements Supervisor {
  readonly reaped: ReapedInstances;
  readonly reapedTerminals: { stopped: string[]; stale: string[] };
  readonly #o: SupervisorOptions;
  readonly #ctx: SpawnContext;
  readonly #terms: Terminals;
  readonly #slots = new Map<string, Slot>();
  readonly #activator: Activator;
  #booting = true;
  /** The host is closing: an exit re-arms nothing, a start timeout stops nothing. */
  #closing = false;

  constructor(
    o: SupervisorOptions,
    terms: Terminals,
    reaped: ReapedInstances,
    ctx: Omit<SpawnContext, "closing">,
  ) {
    this.#o = o;
    this.#terms = terms;
    this.reaped = reaped;
    this.reapedTerminals = terms.reaped;
    this.#ctx = { ...ctx, closing: () => this.#closing };
    this.#activator = new Activator((name) => this.#admit(name));
  }

  /** Every socket first (clients can connect as soon as theirs exists), the summaries after. */
  async boot(): Promise<void> {
    const names = agentNames(this.#o.root);
    for (const name of names) {
      await this.serve(name).catch((e) => console.error(`cortexfsd: not serving ${name}: ${e}`));
    }
    this.#booting = false;
    for (const name of names) if (this.#slots.has(name)) this.#markIdle(name);
  }

  serve(name: string): Promise<string> {
    const have = this.#slots.get(name);
    if (have) return Promise.resolve(have.path);
    const path = `${this.#o.run}/agent/${name}.sock`;
    try {
      if (Deno.lstatSync(path).isSocket) Deno.removeSync(path); // stale from a killed host
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* absent */
    }
    const fd = listenUnix(path);
    if (fd < 0) {
      return Promise.reject(new CtxError("EIO", `cannot listen on ${path} (errno ${-fd})`));
    }
    try {
      Deno.chmodSync(path, 0o666); // SO_PEERCRED decides, in the instance
      linkAlias(this.#o.root, name, path);
    } catch (e) {
      // One agent whose socket or alias cannot be made is not served; the host and every other
      // agent go on (a throw here used to end the host's start, the socket's fd left open).
      closeFd(fd);
      try {
        Deno.removeSync(path);
      } catch { /* any kind: cleanup on the way out, the real error is rejected next */ }
      return Promise.reject(e);
    }
    this.#slots.set(name, { name, fd, path });
    this.#activator.arm(name, fd);
    if (!this.#booting) this.#markIdle(name);
    return Promise.resolve(path);
  }

  async unserve(name: string): Promise<void> {
    const slot = this.#slots.get(name);
    if (!slot) return;
    this.#slots.delete(name);
    await this.#terms.stop(name);
    if (slot.live) await slot.live.stop();
    this.#activator.forget(name, slot.fd);
    for (const p of [slot.path, `${this.#o.root}/agent/${name}.sock`]) {
      try {
        Deno.removeSync(p);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* gone */
      }
    }
  }

  async start(
    name: string,
    uid?: number,
  ): Promise<{ receipt: InstanceReceipt; already: boolean }> {
    const slot = this.#slots.get(name);
    if (uid !== undefined && slot && !slot.live) this.#capped(uid);
    const { live, already } = await this.#start(name);
    if (!(await live.ready) || !live.receipt) {
      if (live.timedOut) {
        const f = live.notStarted();
        throw new CtxError("ETIMEDOUT", f.message);
      }
      throw new CtxError("EIO", `agent ${name}: its instance exited before it served`);
    }
    return { receipt: live.receipt, already };
  }

  startTerminal(req: TerminalRequest): Promise<{ terminal: TerminalInfo; already: boolean }> {
    if (!this.#o.terminal) {
      return Promise.reject(new CtxError("ENOTSUP", "this host starts no terminals"));
    }
    if (!this.#slots.has(req.agent)) {
      return Promise.reject(new CtxError("ENOENT", `agent ${req.agent} is not served`));
    }
    return this.#terms.start(req);
  }

  async stop(name: string): Promise<{
    result: Stopped | "none";
    receipt: InstanceReceipt | null;
    terminals: StoppedTerminal[];
  }> {
    const slot = this.#slots.get(name);
    if (!slot) throw new CtxError("ENOENT", `agent ${name} is not served`);
    // The terminals first (each by its receipt), then the instance.
    const terminals = await this.#terms.stop(name);
    const live = slot.live;
    if (!live) return { result: "none", receipt: null, terminals };
    return { result: await live.stop(), receipt: live.receipt ?? null, terminals };
  }

  status(name: string): InstanceInfo {
    const d = `${this.#o.root}/agent/${name}.d`;
    const pid = Number(readTrim(`${d}/pid`)) || null;
    const receipt = this.#slots.get(name)?.live?.receipt ?? null;
    return {
      agent: name,
      state: readTrim(`${d}/status`) || "dead",
      pid,
      receipt,
      terminals: this.#terms.list(name),
    };
  }

  ps(): InstanceInfo[] {
    return [...this.#slots.values()].filter((s) => s.live || this.#terms.list(s.name).length > 0)
      .map((s) => this.status(s.name));
  }

  agents(): string[] {
    return [...this.#slots.keys()].sort();
  }

  async close(): Promise<void> {
    this.#closing = true;
    await this.#terms.close(); // the host's terminals end with it (ctxterm records process.exit)
    const lives = [...this.#slots.values()].flatMap((s) => s.live ? [s.live] : []);
    await Promise.all(lives.map((live) => live.leave()));
    await this.#activator.close();
    for (const slot of this.#slots.values()) {
      this.#ctx.presence.set(slot.name, "dead", null); // nothing serves it any more
      closeFd(slot.fd);
      try {
        Deno.removeSync(slot.path);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* gone */
      }
    }
    this.#slots.clear();
  }

  /**
   * A client waits on idle agent `name`'s socket (its activator fired and disarmed it): the host
   * takes the waiting connections itself, nonblocking, and applies the instance's owner rule
   * (src/runtime/admit.ts) to each peer's SO_PEERCRED uid. A refused one gets the instance's
   * EACCES frame and is closed (nothing of it is read, nothing waits on it); the first admitted
   * one starts the instance, which gets it as its fd 5 and serves it as if it had accepted it;
   * whoever waits behind it stays queued for the instance. Nobody admitted waiting: armed again.
   */
  #admit(name: string): void {
    const slot = this.#slots.get(name);
    // An armed socket has no instance; the guard keeps a connection from being taken from one.
    if (!slot || slot.live || slot.starting) return;
    for (let i = 0; i < ADMIT_BATCH; i++) {
      const c = acceptWaiting(slot.fd);
      if (c === -ERRNO.EAGAIN) break;
      if (c === -ECONNABORTED || c === -ERRNO.EINTR) continue;
      if (c < 0) {
        // The host cannot take it (out of fds): the instance takes it and checks it, as before
        // the host did; left armed, the still readable socket would spin the activator.
        console.error(`cortexfsd: agent ${name}: accept failed (errno ${-c}): starting it`);
        return this.#launch(name);
      }
      try {
        const uid = peerCred(c).uid;
        admitUid(this.#o.root, name, uid);
        this.#capped(uid);
      } catch (e) {
        const err = toCtxError(e);
        answerClose(c, new TextEncoder().encode(encodeFrame(errorOf(err.errno, err.message))));
        continue;
      }
      return this.#launch(name, c);
    }
    this.#activator.arm(name, slot.fd);
  }

  /** Starts `name`'s instance for the client of `conn` (the host's copy, closed here). */
  #launch(name: string, conn?: number): void {
    void this.#start(name, conn).catch((e) => console.error(`cortexfsd: starting ${name}: ${e}`));
  }

  /**
   * Starts `name`'s instance unless one lives or is starting; resolves once it is ready or gone.
   * `conn`: an admitted connection the instance is handed (the host closes its own copy, and
   * answers it instead when the instance never serves).
   */
  async #start(name: string, conn?: number): Promise<{ live: Live; already: boolean }> {
    const slot = this.#slots.get(name);
    const busy = slot?.live ?? slot?.starting;
    if (!slot || busy) {
      // Never with `conn` (the host takes one only from an armed socket, with no instance): it
      // is told to connect again rather than dropped without a word.
      if (conn !== undefined) {
        const again = errorOf("EAGAIN", `agent ${name}: its instance is starting; connect again`);
        answerClose(conn, new TextEncoder().encode(encodeFrame(again)));
      }
      if (!slot) throw new CtxError("ENOENT", `agent ${name} is not served`);
      if (slot.live) return { live: slot.live, already: true };
      return { live: await slot.starting!, already: true };
    }
    this.#activator.disarm(name);
    try {
      slot.owner = ownerOf(this.#o.root, name);
    } catch {
      slot.owner = undefined; // unreadable: the instance refuses every peer but root anyway
    }
    let live: Live;
    try {
      live = spawnInstance(slot, this.#ctx, (l) => this.#exited(slot, l), conn);
    } catch (e) {
      if (conn !== undefined) {
        const why = `agent ${name}: its instance could not start: ${toCtxError(e).message}`;
        answerClose(conn, new TextEncoder().encode(encodeFrame(errorOf("EIO", why))));
      }
      this.#spawnFailed(slot, e);
      throw e;
    }
    if (conn !== undefined) {
      // The instance holds its own copy from the spawn on: the host's is closed once it serves,
      // or answered like the clients in its backlog when it never does.
      void live.ready.then((ok) => {
        if (ok || this.#closing) closeFd(conn);
        else answerClose(conn, new TextEncoder().encode(encodeFrame(live.notStarted())));
      });
    }
    slot.live = live;
    const p = live.ready.then(() => live);
    slot.starting = p;
    try {
      await p;
    } finally {
      slot.starting = undefined;
    }
    return { live, already: false };
  }

  /** EAGAIN when `uid` (not root) already has {@link MAX_INSTANCES_PER_UID} instances. */
  #capped(uid: number): void {
    if (uid === 0) return;
    let n = 0;
    for (const s of this.#slots.values()) if (s.live && s.owner === uid) n++;
    if (n < MAX_INSTANCES_PER_UID) return;
    throw new CtxError(
      "EAGAIN",
      `uid ${uid} already has ${n} agent instances running (at most ${MAX_INSTANCES_PER_UID}); try again once one exits`,
    );
  }

  /** `live`'s exit is recorded: its slot is free, and a socket still served is armed again. */
  #exited(slot: Slot, live: Live): void {
    slot.live = undefined;
    if (this.#closing || this.#slots.get(slot.name) !== slot) return;
    void live.ready.then((wasReady) => {
      if (!wasReady) {
        // It never served: the clients waiting now would only start it again. Tell them.
        const frame = encodeFrame(live.notStarted());
        refuseWaiting(slot.fd, new TextEncoder().encode(frame));
      }
      this.#activator.arm(slot.name, slot.fd);
    });
  }

  /**
   * No instance could be spawned (socketpair, spawn or its broker failed: out of fds, say): as
   * for an instance that never served, the clients waiting are told, the agent reads `dead`, and
   * the socket is armed again (left disarmed, no later connection would ever start one).
   */
  #spawnFailed(slot: Slot, e: unknown): void {
    const why = `agent ${slot.name}: its instance could not start: ${
      String((e as Error)?.message ?? e).replace(/\s+/g, " ")
    }`;
    try {
      this.#ctx.presence.log(slot.name, `cortexfsd: ${why}\n`);
      this.#ctx.presence.set(slot.name, "dead", null);
    } catch { /* the projection is best effort; the clients and the socket below are not */ }
    if (this.#closing || this.#slots.get(slot.name) !== slot) return;
    refuseWaiting(slot.fd, new TextEncoder().encode(encodeFrame(errorOf("EIO", why))));
    this.#activator.arm(slot.name, slot.fd);
  }

  /** Served, no instance: `idle` (written only when it says otherwise: a restart costs reads). */
  #markIdle(name: string): void {
    const d = `${this.#o.root}/agent/${name}.d`;
    if (this.#slots.get(name)?.live) return;
    if (readTrim(`${d}/status`) !== "idle" || readTrim(`${d}/pid`) !== "") {
      this.#ctx.presence.set(name, "idle", null);
    }
  }
}
