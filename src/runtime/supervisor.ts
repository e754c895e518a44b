/** The supervisor: owns every agent's listening socket, starts one instance per agent on demand (itself, or as a systemd transient scope where a manager answers), records receipts before releasing it, stops only what a receipt proves. */
import { type ChildProcess, spawn } from "node:child_process";
import { CtxError } from "../abi/errno.ts";
import { encodeFrame, errorOf } from "../abi/frames.ts";
import { ensureDir } from "../store/atomic.ts";
import { readRegularText } from "../store/regular.ts";
import { closeFd, listenUnix, refuseWaiting } from "../sys/listen.ts";
import { seqpacketPair } from "../sys/fdpass.ts";
import { Activator } from "./activator.ts";
import { Broker } from "./broker.ts";
import { groupsDir, reapGroups } from "./groups.ts";
import { dropArgv } from "./caps.ts";
import { logPump, Presence } from "./presence.ts";
import {
  dropReceipt,
  type InstanceReceipt,
  projectReceipt,
  type ReapedInstances,
  reapReceipts,
  receiptOf,
  receiptsDir,
  scopeUnit,
  type Stopped,
  writeReceipt,
} from "./receipt.ts";
import { invocationOf, type Manager, scopeArgv, stopperOf } from "./systemd.ts";
import { linkAlias } from "./server.ts";
import { startTerminals, type TerminalInfo, type TerminalRequest } from "./terminals.ts";

/** How long a stopped instance has between SIGTERM and SIGKILL. */
export const STOP_GRACE_MS = 5_000;
/** Default idle timeout of an instance (seconds). */
export const IDLE_SECONDS = 300;
/** Default start timeout of an instance (seconds): from its release to its `ready` line. */
export const START_SECONDS = 30;

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
   * A systemd manager that answered (src/runtime/systemd.ts `detectManager`): instances run as
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

interface Live {
  child: ChildProcess;
  /**
   * Absent until it is released, and for good when the process was gone before its receipt
   * could be made (or the manager named no invocation).
   */
  receipt?: InstanceReceipt;
  /** Resolves once it is released or will never be (at once for the built-in supervisor). */
  released: Promise<void>;
  /** Why the host did not release it (a failure). */
  why?: string;
  /** Resolves once the exit is recorded (status, receipt removed, socket armed again). */
  exited: Promise<void>;
  /** True once the instance printed `ready`; false when it ended before. */
  ready: Promise<boolean>;
  stopping: boolean;
  /** The host is closing: its end is not a failure. */
  leaving: boolean;
  /** It was not ready within the start timeout: the host stopped it (a failure). */
  timedOut: boolean;
}

interface Slot {
  name: string;
  fd: number;
  path: string;
  live?: Live;
  starting?: Promise<Live>;
}

/** The running supervisor. */
export interface Supervisor {
  /** Creates (or keeps) `name`'s listening socket and arms it; no instance is started. */
  serve(name: string): Promise<string>;
  /** The definition is gone: its instance is stopped, its socket closed and removed. */
  unserve(name: string): Promise<void>;
  /** Starts `name`'s instance unless one lives (`already`); resolves once it serves. */
  start(name: string): Promise<{ receipt: InstanceReceipt; already: boolean }>;
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
  } catch {
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
  const grace = o.graceMs ?? STOP_GRACE_MS;
  const startSeconds = o.startSeconds ?? START_SECONDS;
  /** The error frame (and `start`'s error) of an instance that never served. */
  const notStarted = (name: string, live: Live) =>
    live.timedOut
      ? errorOf(
        "ETIMEDOUT",
        `agent ${name}: its instance was not ready within ${startSeconds} s and was stopped (see agent/${name}.d/log)`,
      )
      : errorOf("EIO", `agent ${name}: its instance could not start (see agent/${name}.d/log)`);
  const dir = receiptsDir(o.run);
  const manager = o.manager ?? null;
  const stopOf = stopperOf(manager);
  const reaped = await reapReceipts(dir, {
    graceMs: grace,
    stop: stopOf,
    onReaped: (agent) => presence.set(agent, "idle", null),
  });
  await reapGroups(groupsDir(o.run));
  const terms = await startTerminals({
    root: o.root,
    run: o.run,
    command: o.terminal ?? [],
    graceMs: grace,
    env: o.env,
    logBytes: o.logBytes,
    log: (agent, line) => presence.log(agent, line),
  });
  // Resolved once: a root host without setpriv fails here, before it serves (an instance with
  // every capability is what this replaces, never a fallback).
  const drop = dropArgv({ uid: Deno.uid() });
  const slots = new Map<string, Slot>();
  let closing = false;

  const meta = (name: string, receipt: InstanceReceipt & { exit?: unknown }) =>
    projectReceipt(`${o.root}/agent/${name}.d/meta.json`, receipt);

  const spawnInstance = (slot: Slot): Live => {
    const { name } = slot;
    presence.set(name, "start", null);
    const args = [...o.command, name, "--root", o.root, "--run", o.run];
    if (o.mount) args.push("--mount", o.mount);
    args.push("--idle-timeout", String(o.idleSeconds ?? IDLE_SECONDS));
    // sh sets LISTEN_PID to its own pid and execs in place: the instance checks it is its own.
    // Under a manager, systemd-run registers the scope for its own pid and execs sh in place (the
    // pid, fds and pipes stay): sh's `scope` line says the unit exists, so it can be asked about.
    // sh execs setpriv (root host: src/runtime/caps.ts), which fixes the instance's capabilities
    // and execs it in place too: the pid is still the one LISTEN_PID and the receipt name.
    const unit = manager ? scopeUnit(`cortexfs-agent-${name}`) : undefined;
    const [cmd, ...pre] = manager && unit
      ? [...scopeArgv(manager, unit, { graceMs: grace }), "/bin/sh"]
      : ["/bin/sh"];
    const script = manager
      ? 'export LISTEN_PID=$$; echo scope; exec "$@"'
      : 'export LISTEN_PID=$$; exec "$@"';
    // The instance's private channel to the host (its fd 4): the peer checks it has no
    // capability for are made here (src/runtime/broker.ts). Both ends close-on-exec; the spawn
    // puts the instance's at fd 4 on purpose, and the host's copy of it is closed right after.
    const pair = seqpacketPair();
    if (typeof pair === "number") throw new CtxError("EIO", `socketpair failed (errno ${-pair})`);
    const [ours, theirs] = pair;
    let child: ChildProcess;
    try {
      child = spawn(cmd, [...pre, "-c", script, "sh", ...drop, ...args], {
        stdio: ["pipe", "pipe", "pipe", slot.fd, theirs],
        detached: true, // setsid: its own session and group; a signal to it never reaches the host
        env: { ...(o.env ?? Deno.env.toObject()), LISTEN_FDS: "1", LISTEN_FDNAMES: name },
      });
    } catch (e) {
      closeFd(ours);
      throw e;
    } finally {
      closeFd(theirs);
    }
    const broker = new Broker(ours, {
      agent: name,
      listener: slot.fd,
      path: slot.path,
      root: o.root,
      run: o.run,
    });
    const flush = logPump(presence, name, child);
    const ready = Promise.withResolvers<boolean>();
    const scoped = Promise.withResolvers<boolean>();
    // Its stdout, line by line: `scope` (sh, under a manager), `status <word>` (the instance's
    // report: the host writes `status` and `pid`, then acknowledges with `ok`), `ready`.
    let out = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (c: string) => {
      out += c;
      let nl: number;
      while ((nl = out.indexOf("\n")) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        if (line === "scope") scoped.resolve(true);
        else if (line === "ready") ready.resolve(true);
        else if (line.startsWith("status ")) reported(line.slice(7));
      }
      if (out.length > 4096) out = ""; // no line of ours is that long
    });
    /**
     * An instance may only say it serves (`ready`, `busy`); the host says everything else, and a
     * host that is stopping it keeps saying `stopping`. The pid is the receipt's, not a claim.
     */
    const reported = (word: string) => {
      const st = live.receipt;
      if (st && (word === "ready" || word === "busy") && !live.stopping && !live.timedOut) {
        presence.set(name, word, st.pid);
      }
      if (child.stdin?.writable) child.stdin.write("ok\n");
    };
    child.stdin?.on("error", () => {/* it exited first: the exit event tells */});
    const exit = Promise.withResolvers<{ code: number | null; signal: string | null }>();
    child.on("exit", (code, signal) => exit.resolve({ code, signal }));
    child.on("error", () => exit.resolve({ code: 127, signal: null }));
    const pid = child.pid ?? 0;
    const file = `${dir}/${name}.json`;
    let gone = false;
    // The start timeout: not ready in time = hung before it served. Stopped by its receipt like
    // `stop` (SIGTERM or the unit's stop, SIGKILL after the grace), or, never released, let go
    // (stdin EOF); the exit below records the failure.
    let served = false;
    const timer = pid > 0
      ? setTimeout(() => {
        if (served || closing || live.stopping || live.leaving) return;
        live.timedOut = true;
        presence.log(
          name,
          `cortexfsd: instance ${name} pid ${pid} not ready within ${startSeconds} s (start timeout): stopping it\n`,
        );
        presence.set(name, "stopping", pid);
        if (live.receipt) void stopOf(live.receipt, { graceMs: grace, exited: live.exited });
        else child.stdin?.end();
      }, startSeconds * 1000)
      : undefined;
    void ready.promise.then((ok) => {
      served = ok;
      clearTimeout(timer);
    });
    const live: Live = {
      child,
      ready: ready.promise,
      released: Promise.resolve(),
      stopping: false,
      leaving: false,
      timedOut: false,
      exited: exit.promise.then(({ code, signal }) => {
        gone = true;
        void broker.close(); // nobody is left to ask (a child of the instance may hold fd 4)
        scoped.resolve(false);
        ready.resolve(false);
        clearTimeout(timer);
        flush();
        const failed = live.timedOut || live.why !== undefined ||
          (!live.stopping && !live.leaving && (code !== 0 || signal !== null));
        const why = live.timedOut
          ? `: failed: not ready within ${startSeconds} s`
          : live.why !== undefined
          ? `: failed: ${live.why}`
          : ": failed";
        presence.log(
          name,
          `cortexfsd: instance ${name} pid ${pid} exited (${
            signal ? `signal ${signal}` : `code ${code}`
          })${failed ? why : ""}\n`,
        );
        presence.set(name, failed ? "dead" : "idle", null);
        const receipt = live.receipt;
        if (receipt) meta(name, { ...receipt, exit: { code, signal, at: Date.now() / 1000 } });
        // Last: another process that saw the receipt go finds the log line, status and meta.json
        // of this exit already written.
        dropReceipt(file);
        slot.live = undefined;
        if (closing || slots.get(name) !== slot) return;
        void live.ready.then((wasReady) => {
          if (!wasReady) {
            // It never served: the clients waiting now would only start it again. Tell them.
            const frame = encodeFrame(notStarted(name, live));
            refuseWaiting(slot.fd, new TextEncoder().encode(frame));
          }
          activator.arm(name, slot.fd);
        });
      }),
    };
    const release = (receipt: InstanceReceipt) => {
      // Recorded before the instance is released: a host killed from here on leaves proof.
      writeReceipt(dir, receipt);
      live.receipt = receipt;
      meta(name, receipt);
      presence.set(name, "start", pid);
      // The correlation facts in the ordinary log (seed: durable agent.start events).
      presence.log(
        name,
        `cortexfsd: agent.start unit=${receipt.unit} invocation=${receipt.invocation} pid=${pid}\n`,
      );
      child.stdin?.write("go\n");
    };
    const uid = Deno.uid() ?? 0;
    if (pid > 0 && !(manager && unit)) {
      // The built-in supervisor: its own unit name and invocation, released at once.
      const receipt = receiptOf(name, pid, { uid });
      if (receipt) release(receipt);
    } else if (pid > 0 && manager && unit) {
      live.released = (async () => {
        // The manager's unit and invocation: asked once the scope exists (sh's line).
        if (!(await scoped.promise)) return; // systemd-run failed: its stderr is in the log
        const invocation = await invocationOf(manager, unit);
        if (gone || live.timedOut) return;
        const receipt = invocation ? receiptOf(name, pid, { uid, invocation, unit }) : undefined;
        if (!receipt) {
          live.why = `the manager gave no InvocationID for ${unit}`;
          presence.log(name, `cortexfsd: instance ${name} pid ${pid}: ${live.why}; not released\n`);
          child.stdin?.end(); // held: EOF before `go` ends it, nothing served
          return;
        }
        receipt.manager = "systemd";
        release(receipt);
      })();
    }
    return live;
  };

  const start = async (name: string) => {
    const slot = slots.get(name);
    if (!slot) throw new CtxError("ENOENT", `agent ${name} is not served`);
    if (slot.live) return { live: slot.live, already: true };
    if (slot.starting) return { live: await slot.starting, already: true };
    activator.disarm(name);
    const live = spawnInstance(slot);
    slot.live = live;
    const p = live.ready.then(() => live);
    slot.starting = p;
    try {
      await p;
    } finally {
      slot.starting = undefined;
    }
    return { live, already: false };
  };

  const activator = new Activator((name) => {
    void start(name).catch((e) => console.error(`cortexfsd: starting ${name}: ${e}`));
  });

  const info = (name: string): InstanceInfo => {
    const d = `${o.root}/agent/${name}.d`;
    const pid = Number(readTrim(`${d}/pid`)) || null;
    const receipt = slots.get(name)?.live?.receipt ?? null;
    return {
      agent: name,
      state: readTrim(`${d}/status`) || "dead",
      pid,
      receipt,
      terminals: terms.list(name),
    };
  };

  const stopLive = async (live: Live): Promise<Stopped> => {
    await live.released;
    if (!live.receipt) return "stale"; // nothing proven, nothing signalled
    live.stopping = true;
    presence.set(live.receipt.agent, "stopping", live.receipt.pid);
    const result = await stopOf(live.receipt, { graceMs: grace, exited: live.exited });
    await live.exited;
    return result;
  };

  const serve = (name: string) => {
    const have = slots.get(name);
    if (have) return Promise.resolve(have.path);
    const path = `${o.run}/agent/${name}.sock`;
    try {
      if (Deno.lstatSync(path).isSocket) Deno.removeSync(path); // stale from a killed host
    } catch { /* absent */ }
    const fd = listenUnix(path);
    if (fd < 0) {
      return Promise.reject(new CtxError("EIO", `cannot listen on ${path} (errno ${-fd})`));
    }
    Deno.chmodSync(path, 0o666); // SO_PEERCRED decides, in the instance
    linkAlias(o.root, name, path);
    slots.set(name, { name, fd, path });
    activator.arm(name, fd);
    if (!booting) markIdle(name);
    return Promise.resolve(path);
  };
  /** Served, no instance: `idle` (written only when it says otherwise: a restart costs reads). */
  const markIdle = (name: string) => {
    const d = `${o.root}/agent/${name}.d`;
    if (slots.get(name)?.live) return;
    if (readTrim(`${d}/status`) !== "idle" || readTrim(`${d}/pid`) !== "") {
      presence.set(name, "idle", null);
    }
  };

  // Every socket first (clients can connect as soon as theirs exists), the summaries after.
  let booting = true;
  const names = agentNames(o.root);
  for (const name of names) {
    await serve(name).catch((e) => console.error(`cortexfsd: not serving ${name}: ${e}`));
  }
  booting = false;
  for (const name of names) if (slots.has(name)) markIdle(name);

  return {
    serve,
    reaped,
    agents: () => [...slots.keys()].sort(),
    async start(name) {
      const { live, already } = await start(name);
      if (!(await live.ready) || !live.receipt) {
        if (live.timedOut) {
          const f = notStarted(name, live);
          throw new CtxError("ETIMEDOUT", f.message);
        }
        throw new CtxError("EIO", `agent ${name}: its instance exited before it served`);
      }
      return { receipt: live.receipt, already };
    },
    reapedTerminals: terms.reaped,
    startTerminal(req) {
      if (!o.terminal) {
        return Promise.reject(new CtxError("ENOTSUP", "this host starts no terminals"));
      }
      if (!slots.has(req.agent)) {
        return Promise.reject(new CtxError("ENOENT", `agent ${req.agent} is not served`));
      }
      return terms.start(req);
    },
    async stop(name) {
      const slot = slots.get(name);
      if (!slot) throw new CtxError("ENOENT", `agent ${name} is not served`);
      // The terminals first (each by its receipt), then the instance.
      const terminals = await terms.stop(name);
      const live = slot.live;
      if (!live) return { result: "none", receipt: null, terminals };
      return { result: await stopLive(live), receipt: live.receipt ?? null, terminals };
    },
    status: info,
    ps: () =>
      [...slots.values()].filter((s) => s.live || terms.list(s.name).length > 0).map((s) =>
        info(s.name)
      ),
    async unserve(name) {
      const slot = slots.get(name);
      if (!slot) return;
      slots.delete(name);
      await terms.stop(name);
      if (slot.live) await stopLive(slot.live);
      activator.forget(name, slot.fd);
      for (const p of [slot.path, `${o.root}/agent/${name}.sock`]) {
        try {
          Deno.removeSync(p);
        } catch { /* gone */ }
      }
    },
    async close() {
      closing = true;
      await terms.close(); // the host's terminals end with it (ctxterm records process.exit)
      const lives = [...slots.values()].flatMap((s) => s.live ? [s.live] : []);
      await Promise.all(lives.map(async (live) => {
        live.leaving = true;
        live.child.stdin?.end(); // EOF: the instance interrupts its runs (EINTR) and exits
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), grace));
        const why = await Promise.race([live.exited.then(() => "gone" as const), late]);
        clearTimeout(timer);
        if (why === "late" && live.receipt) {
          await stopOf(live.receipt, { graceMs: grace, exited: live.exited });
        }
        await live.exited;
      }));
      await activator.close();
      for (const slot of slots.values()) {
        presence.set(slot.name, "dead", null); // nothing serves it any more
        closeFd(slot.fd);
        try {
          Deno.removeSync(slot.path);
        } catch { /* gone */ }
      }
      slots.clear();
    },
  };
}
