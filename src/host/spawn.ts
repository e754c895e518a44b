/** One agent instance's process as its host holds it: the spawn (argv, environment, socketpair), the receipt before release, the stdout status lines, the start timeout, the exit. */
import { type ChildProcess, spawn } from "node:child_process";
import { CtxError, ignore } from "../abi/errno.ts";
import { type ErrorFrame, errorOf } from "../abi/frames.ts";
import { closeFd } from "../sys/listen.ts";
import { seqpacketPair } from "../sys/fdpass.ts";
import { Broker } from "./broker.ts";
import { groupsDir, reapGroups } from "../runtime/groups.ts";
import { logPump, type Presence } from "../runtime/presence.ts";
import {
  dropReceipt,
  type InstanceReceipt,
  projectReceipt,
  receiptOf,
  receiptsDir,
  scopeUnit,
  type StopOptions,
  type Stopped,
  writeReceipt,
} from "./receipt.ts";
import { invocationOf, type Manager, scopeArgv } from "./systemd.ts";

/** What every instance's spawn takes from its supervisor (options resolved, parts shared). */
export interface SpawnContext {
  root: string;
  run: string;
  mount?: string;
  /** The argv that runs `cortexfsd instance` (the agent name and flags are appended). */
  command: string[];
  /** Idle timeout of the instance, seconds. */
  idleSeconds: number;
  /** The environment instances get (plus LISTEN_FDS/LISTEN_PID); absent: this process's at the spawn. */
  env?: Record<string, string>;
  /** A systemd manager that answered, or null for the built-in supervisor. */
  manager: Manager | null;
  /** SIGTERM-to-SIGKILL grace of a stop (ms). */
  graceMs: number;
  /** Start timeout, seconds: from the spawn to the `ready` line. */
  startSeconds: number;
  /** The setpriv prefix of a root host (src/host/caps.ts `dropArgv`), resolved once. */
  drop: string[];
  presence: Presence;
  /** Stops a process its receipt proves (src/host/systemd.ts `stopperOf`). */
  stop: (r: InstanceReceipt, o: StopOptions) => Promise<Stopped>;
  /** True once the host is closing. */
  closing: () => boolean;
}

/** The agent's listening socket an instance is given as its fd 3. */
export interface Listener {
  name: string;
  fd: number;
  path: string;
}

/**
 * Spawns `l.name`'s instance, held until its receipt is on disk (with `conn`, the connection the
 * host accepted and admitted for it, as its fd 5: the caller keeps its own copy); `onExit` hears of the exit once
 * it is recorded (log line, status, `meta.json`, receipt removed). Throws when the socketpair or
 * the spawn fails.
 */
export function spawnInstance(
  l: Listener,
  ctx: SpawnContext,
  onExit: (live: Live) => void,
  conn?: number,
): Live {
  ctx.presence.set(l.name, "start", null);
  const { cmd, argv, unit } = instanceArgv(l.name, ctx, conn !== undefined);
  const { child, ours } = spawnChild(cmd, argv, l, ctx.env, conn);
  // If its wiring fails (the broker's eventfd: out of fds) the child is still held, waiting for
  // `go` on stdin, so nothing of it ran: it is ended rather than left held for good.
  const fail = (e: unknown): never => {
    try {
      child.kill("SIGKILL");
    } catch (e) {
      ignore(e, TypeError); /* gone */
    }
    throw e;
  };
  // The host's end of the pair is the broker's once it is made (its run closes it); until then
  // it is closed here, exactly once.
  let broker: Broker;
  try {
    broker = new Broker(ours, {
      agent: l.name,
      listener: l.fd,
      path: l.path,
      root: ctx.root,
      run: ctx.run,
    });
  } catch (e) {
    closeFd(ours);
    return fail(e);
  }
  try {
    return new Live(l, { child, broker, unit }, ctx, onExit);
  } catch (e) {
    void broker.close();
    return fail(e);
  }
}

/** The spawn's program and arguments, and the scope unit it runs as under a manager. */
function instanceArgv(
  name: string,
  ctx: SpawnContext,
  conn: boolean,
): { cmd: string; argv: string[]; unit?: string } {
  const { manager } = ctx;
  const args = [...ctx.command, name, "--root", ctx.root, "--run", ctx.run];
  if (ctx.mount) args.push("--mount", ctx.mount);
  if (conn) args.push("--conn");
  args.push("--idle-timeout", String(ctx.idleSeconds));
  // sh sets LISTEN_PID to its own pid and execs in place: the instance checks it is its own.
  // Under a manager, systemd-run registers the scope for its own pid and execs sh in place (the
  // pid, fds and pipes stay): sh's `scope` line says the unit exists, so it can be asked about.
  // sh execs setpriv (root host: src/host/caps.ts), which fixes the instance's capabilities
  // and execs it in place too: the pid is still the one LISTEN_PID and the receipt name.
  const unit = manager ? scopeUnit(`cortexfs-agent-${name}`) : undefined;
  const [cmd, ...pre] = manager && unit
    ? [...scopeArgv(manager, unit, { graceMs: ctx.graceMs }), "/bin/sh"]
    : ["/bin/sh"];
  const script = manager
    ? 'export LISTEN_PID=$$; echo scope; exec "$@"'
    : 'export LISTEN_PID=$$; exec "$@"';
  return { cmd, argv: [...pre, "-c", script, "sh", ...ctx.drop, ...args], unit };
}

/**
 * Spawns `cmd` in its own session, `l.fd` as its fd 3, a new socketpair's end as its fd 4 and
 * `conn` (when given) as its fd 5.
 */
function spawnChild(
  cmd: string,
  argv: string[],
  l: Listener,
  env: Record<string, string> | undefined,
  conn: number | undefined,
): { child: ChildProcess; ours: number } {
  // The instance's private channel to the host (its fd 4): the peer checks it has no
  // capability for are made here (src/host/broker.ts). Both ends close-on-exec; the spawn
  // puts the instance's at fd 4 on purpose, and the host's copy of it is closed right after.
  const pair = seqpacketPair();
  if (typeof pair === "number") throw new CtxError("EIO", `socketpair failed (errno ${-pair})`);
  const [ours, theirs] = pair;
  let child: ChildProcess;
  try {
    child = spawn(cmd, argv, {
      stdio: ["pipe", "pipe", "pipe", l.fd, theirs, ...(conn === undefined ? [] : [conn])],
      detached: true, // setsid: its own session and group; a signal to it never reaches the host
      env: { ...(env ?? Deno.env.toObject()), LISTEN_FDS: "1", LISTEN_FDNAMES: l.name },
    });
  } catch (e) {
    closeFd(ours);
    throw e;
  } finally {
    closeFd(theirs);
  }
  return { child, ours };
}

/** Calls `on` with each line `child` writes to its stdout. */
function readLines(child: ChildProcess, on: (line: string) => void): void {
  let out = "";
  child.stdout?.setEncoding("utf8");
  child.stdout?.on("data", (c: string) => {
    out += c;
    let nl: number;
    while ((nl = out.indexOf("\n")) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      on(line);
    }
    if (out.length > 4096) out = ""; // no line of ours is that long
  });
}

/** One instance process, from its spawn to its recorded exit. */
export class Live {
  readonly child: ChildProcess;
  /**
   * Absent until it is released, and for good when the process was gone before its receipt
   * could be made (or the manager named no invocation).
   */
  receipt?: InstanceReceipt;
  /** Resolves once it is released or will never be (at once for the built-in supervisor). */
  released: Promise<void> = Promise.resolve();
  /** Why the host did not release it (a failure). */
  why?: string;
  /** Resolves once the exit is recorded (status, receipt removed, socket armed again). */
  readonly exited: Promise<void>;
  /** True once the instance printed `ready`; false when it ended before. */
  readonly ready: Promise<boolean>;
  stopping = false;
  /** The host is closing: its end is not a failure. */
  leaving = false;
  /** It was not ready within the start timeout: the host stopped it (a failure). */
  timedOut = false;

  readonly #name: string;
  readonly #ctx: SpawnContext;
  readonly #broker: Broker;
  readonly #flush: () => void;
  readonly #ready = Promise.withResolvers<boolean>();
  readonly #scoped = Promise.withResolvers<boolean>();
  readonly #pid: number;
  readonly #file: string;
  readonly #timer: ReturnType<typeof setTimeout> | undefined;
  #gone = false;
  #served = false;

  constructor(
    l: Listener,
    spawned: { child: ChildProcess; broker: Broker; unit?: string },
    ctx: SpawnContext,
    onExit: (live: Live) => void,
  ) {
    const { name } = l;
    const { child } = spawned;
    this.#name = name;
    this.#ctx = ctx;
    this.child = child;
    this.#broker = spawned.broker;
    this.#flush = logPump(ctx.presence, name, child);
    this.ready = this.#ready.promise;
    // Its stdout, line by line: `scope` (sh, under a manager), `status <word>` (the instance's
    // report: the host writes `status` and `pid`, then acknowledges with `ok`), `ready`.
    readLines(child, (line) => {
      if (line === "scope") this.#scoped.resolve(true);
      else if (line === "ready") this.#ready.resolve(true);
      else if (line.startsWith("status ")) this.#reported(line.slice(7));
    });
    child.stdin?.on("error", () => {/* it exited first: the exit event tells */});
    const exit = Promise.withResolvers<{ code: number | null; signal: string | null }>();
    child.on("exit", (code, signal) => exit.resolve({ code, signal }));
    child.on("error", () => exit.resolve({ code: 127, signal: null }));
    this.#pid = child.pid ?? 0;
    this.#file = `${receiptsDir(ctx.run)}/${name}.json`;
    // The start timeout: not ready in time = hung before it served. Stopped by its receipt like
    // `stop` (SIGTERM or the unit's stop, SIGKILL after the grace), or, never released, let go
    // (stdin EOF); the exit below records the failure.
    this.#timer = this.#pid > 0
      ? setTimeout(() => this.#timeout(), ctx.startSeconds * 1000)
      : undefined;
    void this.ready.then((ok) => {
      this.#served = ok;
      clearTimeout(this.#timer);
    });
    this.exited = exit.promise.then(async ({ code, signal }) => {
      // Before onExit re-arms the socket: the receipts read now are all this instance's.
      const reaping = this.#reap();
      this.#exit(code, signal);
      onExit(this);
      await reaping;
    });
    this.#hold(spawned.unit);
  }

  /** The error frame (and `start`'s error) of an instance that never served. */
  notStarted(): ErrorFrame {
    const name = this.#name;
    return this.timedOut
      ? errorOf(
        "ETIMEDOUT",
        `agent ${name}: its instance was not ready within ${this.#ctx.startSeconds} s and was stopped (see agent/${name}.d/log)`,
      )
      : errorOf("EIO", `agent ${name}: its instance could not start (see agent/${name}.d/log)`);
  }

  /** Stops it as its receipt allows (`stale`: nothing proven, nothing signalled); resolves once its exit is recorded. */
  async stop(): Promise<Stopped> {
    await this.released;
    if (!this.receipt) return "stale"; // nothing proven, nothing signalled
    this.stopping = true;
    this.#ctx.presence.set(this.receipt.agent, "stopping", this.receipt.pid);
    const result = await this.#ctx.stop(this.receipt, {
      graceMs: this.#ctx.graceMs,
      exited: this.exited,
    });
    await this.exited;
    return result;
  }

  /** The host is closing: stdin EOF, then a stop by its receipt after the grace; resolves once its exit is recorded. */
  async leave(): Promise<void> {
    const grace = this.#ctx.graceMs;
    this.leaving = true;
    this.child.stdin?.end(); // EOF: the instance interrupts its runs (EINTR) and exits
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), grace));
    const why = await Promise.race([this.exited.then(() => "gone" as const), late]);
    clearTimeout(timer);
    if (why === "late" && this.receipt) {
      await this.#ctx.stop(this.receipt, { graceMs: grace, exited: this.exited });
    }
    await this.exited;
  }

  /** Makes its receipt and releases it: at once (the built-in supervisor), or once the manager's scope exists. */
  #hold(unit: string | undefined): void {
    const { manager } = this.#ctx;
    const name = this.#name;
    const pid = this.#pid;
    const uid = Deno.uid() ?? 0;
    if (pid > 0 && !(manager && unit)) {
      // The built-in supervisor: its own unit name and invocation, released at once.
      const receipt = receiptOf(name, pid, { uid });
      if (receipt) this.#release(receipt);
    } else if (pid > 0 && manager && unit) {
      this.released = (async () => {
        // The manager's unit and invocation: asked once the scope exists (sh's line).
        if (!(await this.#scoped.promise)) return; // systemd-run failed: its stderr is in the log
        const invocation = await invocationOf(manager, unit);
        if (this.#gone || this.timedOut) return;
        const receipt = invocation ? receiptOf(name, pid, { uid, invocation, unit }) : undefined;
        if (!receipt) {
          this.why = `the manager gave no InvocationID for ${unit}`;
          this.#ctx.presence.log(
            name,
            `cortexfsd: instance ${name} pid ${pid}: ${this.why}; not released\n`,
          );
          this.child.stdin?.end(); // held: EOF before `go` ends it, nothing served
          return;
        }
        receipt.manager = "systemd";
        this.#release(receipt);
      })();
    }
  }

  /** Records `receipt`, then lets the held instance go. */
  #release(receipt: InstanceReceipt): void {
    const { presence } = this.#ctx;
    const name = this.#name;
    // Recorded before the instance is released: a host killed from here on leaves proof.
    writeReceipt(receiptsDir(this.#ctx.run), receipt);
    this.receipt = receipt;
    this.#meta(receipt);
    presence.set(name, "start", this.#pid);
    // The correlation facts in the ordinary log (seed: durable agent.start events).
    presence.log(
      name,
      `cortexfsd: agent.start unit=${receipt.unit} invocation=${receipt.invocation} pid=${this.#pid}\n`,
    );
    this.child.stdin?.write("go\n");
  }

  /**
   * An instance may only say it serves (`ready`, `busy`); the host says everything else, and a
   * host that is stopping it keeps saying `stopping`. The pid is the receipt's, not a claim.
   */
  #reported(word: string): void {
    const st = this.receipt;
    if (st && (word === "ready" || word === "busy") && !this.stopping && !this.timedOut) {
      this.#ctx.presence.set(this.#name, word, st.pid);
    }
    if (this.child.stdin?.writable) this.child.stdin.write("ok\n");
  }

  /** The start timeout fired: unless it served (or is ending anyway), stopped as a failure. */
  #timeout(): void {
    const { presence } = this.#ctx;
    const name = this.#name;
    const pid = this.#pid;
    if (this.#served || this.#ctx.closing() || this.stopping || this.leaving) return;
    this.timedOut = true;
    presence.log(
      name,
      `cortexfsd: instance ${name} pid ${pid} not ready within ${this.#ctx.startSeconds} s (start timeout): stopping it\n`,
    );
    presence.set(name, "stopping", pid);
    if (this.receipt) {
      void this.#ctx.stop(this.receipt, { graceMs: this.#ctx.graceMs, exited: this.exited });
    } else this.child.stdin?.end();
  }

  /**
   * Stops the step groups the exited instance left (a killed one ends none of its own). Its
   * sandboxes' parent-death signal is no help here: the kernel sends it with the dying instance's
   * credentials, and an instance (root without CAP_KILL) may not signal a non-root agent's bwrap.
   * The host may: each group by its receipt, that agent's only, read before anything can start
   * the agent again (`reapGroups` reads every receipt before its first wait).
   */
  async #reap(): Promise<void> {
    const name = this.#name;
    try {
      const r = await reapGroups(groupsDir(this.#ctx.run), { agent: name });
      if (r.stopped.length > 0) {
        this.#ctx.presence.log(
          name,
          `cortexfsd: instance ${name} left step groups ${r.stopped.join(" ")}: stopped\n`,
        );
      }
    } catch (e) {
      this.#ctx.presence.log(name, `cortexfsd: instance ${name}: reaping its groups: ${e}\n`);
    }
  }

  /** Records the exit: log line, status, `meta.json`'s exit, and last the receipt's removal. */
  #exit(code: number | null, signal: string | null): void {
    const { presence } = this.#ctx;
    const name = this.#name;
    this.#gone = true;
    void this.#broker.close(); // nobody is left to ask (a child of the instance may hold fd 4)
    this.#scoped.resolve(false);
    this.#ready.resolve(false);
    clearTimeout(this.#timer);
    this.#flush();
    const failed = this.timedOut || this.why !== undefined ||
      (!this.stopping && !this.leaving && (code !== 0 || signal !== null));
    const why = this.timedOut
      ? `: failed: not ready within ${this.#ctx.startSeconds} s`
      : this.why !== undefined
      ? `: failed: ${this.why}`
      : ": failed";
    presence.log(
      name,
      `cortexfsd: instance ${name} pid ${this.#pid} exited (${
        signal ? `signal ${signal}` : `code ${code}`
      })${failed ? why : ""}\n`,
    );
    presence.set(name, failed ? "dead" : "idle", null);
    const receipt = this.receipt;
    if (receipt) this.#meta({ ...receipt, exit: { code, signal, at: Date.now() / 1000 } });
    // Last: another process that saw the receipt go finds the log line, status and meta.json
    // of this exit already written.
    dropReceipt(this.#file);
  }

  /** Projects `receipt` into the agent's `meta.json`. */
  #meta(receipt: InstanceReceipt & { exit?: unknown }): void {
    projectReceipt(`${this.#ctx.root}/agent/${this.#name}.d/meta.json`, receipt);
  }
}
