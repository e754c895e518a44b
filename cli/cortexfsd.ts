/** cortexfsd: mounts /ctx (the FUSE projection of the current storage generation) and supervises one runtime instance per agent; `cortexfsd instance NAME` is such an instance. */
import { Command } from "commander";
import { CtxError, EXIT, exitCode, toCtxError } from "../src/abi/errno.ts";
import { VERSION } from "../src/abi/version.ts";
import { ensureDir } from "../src/store/atomic.ts";
import { readBootstrap } from "../src/store/bootstrap.ts";
import { currentGeneration, currentName, update } from "../src/store/generation.ts";
import { latestVersion, MIGRATIONS } from "../src/store/migrate.ts";
import { resolvePaths } from "../src/store/paths.ts";
import { holdServing } from "../src/store/serving.ts";
import { launchers, mountedType, prepareMountpoint, startMountThread } from "../src/fuse/mod.ts";
import permissions from "../src/program/permissions.json" with { type: "json" };
import { programArgv, self } from "../src/program/self.ts";

const install = self(Deno.env.toObject());
const checkout = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

interface Flags {
  storage?: string;
  mount?: string;
  run?: string;
  dev?: boolean;
  debug?: boolean;
  fusermount?: boolean;
  ttl?: string;
  loopWait?: string;
  mountPriority?: string;
  idleTimeout?: string;
  startTimeout?: string;
  supervisor?: string;
  systemdTools?: string;
}

/** Seconds from `--<flag>` (or its env var); `def` when neither is given. */
function seconds(v: string | undefined, flag: string, def: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n <= 0) {
    throw new CtxError("EINVAL", `--${flag} must be a positive number of seconds, not "${v}"`);
  }
  return n;
}

/** Seconds from `--idle-timeout` (or CTX_IDLE_TIMEOUT); default 300. */
function idleSeconds(v: string | undefined): number {
  return seconds(v, "idle-timeout", 300);
}

/** An approval's wait from CTX_APPROVAL_TIMEOUT (seconds; instances inherit it), or the default. */
function approvalMs(): number | undefined {
  const v = Deno.env.get("CTX_APPROVAL_TIMEOUT");
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n <= 0) {
    throw new CtxError(
      "EINVAL",
      `CTX_APPROVAL_TIMEOUT must be a positive number of seconds, not "${v}"`,
    );
  }
  return n * 1000;
}

/**
 * The argv that starts `cortexfsd instance` the way this process was started: compiled, from the
 * built single file (its pinned deno on its own bundle) or from a checkout (src/program/self.ts).
 */
function instanceCommand(): string[] {
  if (Deno.build.standalone) return [Deno.execPath(), "instance"];
  return programArgv(install, "cortexfsd", ["instance"]);
}

/**
 * Why `dir/files` are not reachable by every user (a directory on the way not searchable, a file
 * not readable, or not executable with `exec`), or null.
 */
function unreachable(
  dir: string,
  files: string[],
  options: { exec?: boolean } = {},
): string | null {
  for (let d = dir; d !== "" && d !== "/"; d = d.replace(/\/[^/]*$/, "")) {
    if (((Deno.statSync(d).mode ?? 0) & 0o001) === 0) return `${d} is not searchable by others`;
  }
  const need = options.exec ? 0o005 : 0o004;
  for (const f of files) {
    if (((Deno.statSync(`${dir}/${f}`).mode ?? 0) & need) !== need) {
      return `${dir}/${f} is not ${options.exec ? "executable" : "readable"} by others`;
    }
  }
  return null;
}

/** What main serves and how, from the flags and the environment, all checked before anything starts. */
interface Settings {
  storage: string;
  mount: string;
  run: string;
  ttl: number;
  priority: number;
  idle: number;
  startIn: number;
}

/** The flags read and checked: every refusal said before anything is touched. */
async function settings(flags: Flags): Promise<Settings> {
  // Everything below needs root (mounting for every user, running each agent as its own uid,
  // binding sockets under the run dir): said once here instead of a raw EACCES or EIO later.
  if (Deno.uid() !== 0) {
    throw new CtxError(
      "EPERM",
      `cortexfsd needs root (it runs as uid ${Deno.uid()}): it mounts /ctx for every user and runs ` +
        "each agent as its owner's uid, so there is no unprivileged mode; start it with " +
        "`sudo cortexfsd` (in a checkout: `sudo tools/deno task dev`)",
    );
  }
  if (flags.dev && install.kind === "built") {
    throw new CtxError(
      "EINVAL",
      "--dev needs a checkout; the built file keeps state where --storage, --mount and --run say",
    );
  }
  const paths = resolvePaths({ dev: flags.dev ? checkout : undefined, env: Deno.env.toObject() });
  // Provider keys are read by the instances (which inherit this environment): in dev mode from
  // the checkout's .dev/secrets, where `ctx provider set` puts them for a dev tree.
  if (flags.dev) Deno.env.set("CORTEXFS_SECRETS", paths.secrets);
  const ttl = flags.ttl === undefined ? 1 : Number(flags.ttl);
  const priority = flags.mountPriority === undefined ? 1 : Number(flags.mountPriority);
  if (
    flags.mountPriority?.trim() === "" || !Number.isInteger(priority) || priority < 0 ||
    priority > 99
  ) {
    throw new CtxError(
      "EINVAL",
      `--mount-priority must be 0 (ordinary scheduling) or a SCHED_RR priority 1-99, not "${flags.mountPriority}"`,
    );
  }
  const idle = idleSeconds(flags.idleTimeout ?? Deno.env.get("CTX_IDLE_TIMEOUT"));
  const startIn = seconds(
    flags.startTimeout ?? Deno.env.get("CTX_START_TIMEOUT"),
    "start-timeout",
    30,
  );
  // Refused here, before anything serves: every instance would refuse it at its own start.
  const { toolCache } = await import("../src/tool/config.ts");
  toolCache(Deno.env.get("CTX_TOOL_CACHE"));
  approvalMs(); // a bad value fails the host at start, not each instance
  if (!Number.isFinite(ttl) || ttl < 0) {
    throw new CtxError(
      "EINVAL",
      `--ttl must be a non-negative number of seconds, not "${flags.ttl}"`,
    );
  }
  return {
    storage: flags.storage ?? paths.storage,
    mount: flags.mount ?? paths.mount,
    run: flags.run ?? paths.run,
    ttl,
    priority,
    idle,
    startIn,
  };
}

/**
 * The storage made ready to serve, and its current generation's root: built or upgraded where
 * this mode may, the mount point and run dir made, the tree's version this binary's.
 */
function prepareStorage(flags: Flags, s: Settings): string {
  const { storage, mount, run } = s;
  // Development mode owns its storage: build or upgrade it here, before anything serves it. Any
  // mode builds a storage that does not exist yet (a first run, as `ctx storage update` would);
  // an existing older tree is upgraded only by dev mode or `ctx storage update` (see below).
  // The mount point is made too, unless something is mounted there: a dead mount left by a
  // killed daemon answers every stat with ENOTCONN; startMount clears it (and says so) in every
  // mode, and refuses a live one.
  if (flags.dev || currentName(storage) === null) {
    if (mountedType(mount) === null) ensureDir(mount, 0o755);
    const r = update(storage, {});
    if (r.created) console.error(`cortexfsd: tree_version ${r.from} -> ${r.to} in ${storage}`);
  } else if (mountedType(mount) === null) ensureDir(mount, 0o755);
  ensureDir(run, 0o755);
  if (install.kind === "built" && Deno.uid() === 0) warnUnreachable(install);
  // The mount keeps the generation current names now for its whole life (rolling upgrades).
  const root = currentGeneration(storage);
  // Serving an older tree would skip what its migrations enforce (e.g. root-owned definitions).
  const have = readBootstrap(root).tree_version, want = latestVersion(MIGRATIONS);
  if (have !== want) {
    throw new CtxError(
      "ENOTSUP",
      have < want
        ? `tree_version ${have} is older than this binary's ${want}: run \`ctx storage update\` first`
        : `tree_version ${have} is newer than this binary's ${want}: use a newer cortexfsd`,
      { path: root },
    );
  }
  return root;
}

/**
 * Other users reach a built install twice: their agents' sandboxes bind the unpacked runtime, and
 * /ctx/bin's launchers exec the file itself. Either out of their reach is warned about.
 */
function warnUnreachable(built: Extract<typeof install, { kind: "built" }>) {
  const lib = unreachable(built.lib, ["deno", "tsh.js"]);
  if (lib) {
    console.error(
      `cortexfsd: warning: ${lib}: the sandboxes of other users' agents bind the runtime from ` +
        "there and cannot reach it; unset CORTEXFS_CACHE (root's default is /var/cache/cortexfs)",
    );
  }
  const exe = built.exe && unreachable(built.exe.replace(/\/[^/]*$/, "") || "/", [
    built.exe.replace(/^.*\//, ""),
  ], { exec: true });
  if (exe) {
    console.error(
      `cortexfsd: warning: ${exe}: /ctx/bin's launchers exec it, so other users cannot; ` +
        "install it first (`sudo cortexfs install` puts it in /usr/local/bin)",
    );
  }
}

/** The host's side of serving: the agent sockets (through a supervisor) and the control socket. */
interface Host {
  control: { close(): Promise<void> };
  runtime: {
    close(): Promise<void>;
    serve(n: string): Promise<string>;
    unserve(n: string): Promise<void>;
  };
}

/**
 * Starts the host: it holds every agent's listening socket and starts one instance process per
 * agent on demand (socket activation); the instances run the agent work on the backing
 * generation. No per-agent index or recovery happens here: each instance does its own agent's
 * when it starts.
 */
async function startHost(flags: Flags, s: Settings, root: string): Promise<Host> {
  const { run, mount } = s;
  let control: { close(): Promise<void> } | undefined;
  try {
    const { startSupervisor } = await import("../src/host/supervisor.ts");
    const { detectManager } = await import("../src/host/systemd.ts");
    const mode = flags.supervisor ?? "auto";
    if (mode !== "auto" && mode !== "builtin" && mode !== "systemd") {
      throw new CtxError("EINVAL", `--supervisor must be auto, builtin or systemd, not "${mode}"`);
    }
    const manager = await detectManager({ mode, tools: flags.systemdTools });
    console.error(
      manager
        ? `cortexfsd: systemd ${manager.version} answers (${manager.ctl}): agent instances run as transient scopes (systemd-run --scope)`
        : "cortexfsd: no systemd manager answers: the built-in supervisor starts the agent instances",
    );
    const { serveControl } = await import("../src/host/control.ts");
    const held: { sup?: Awaited<ReturnType<typeof startSupervisor>> } = {};
    // First: its listener must be close-on-exec before any instance is spawned.
    control = await serveControl(() => held.sup, { root, run });
    const sup = held.sup = await startSupervisor({
      root,
      run,
      mount,
      command: instanceCommand(),
      idleSeconds: s.idle,
      startSeconds: s.startIn,
      manager,
      // `ctx agent start` also starts the session's terminal: this install's own ctxterm.
      terminal: (await import("../src/term/launch.ts")).ctxtermCommand(Deno.env.toObject()),
    });
    if (sup.reapedTerminals.stopped.length) {
      console.error(
        `cortexfsd: stopped terminals a killed host left: ${sup.reapedTerminals.stopped.join(" ")}`,
      );
    }
    if (sup.reaped.stopped.length) {
      console.error(
        `cortexfsd: stopped instances a killed host left: ${sup.reaped.stopped.join(" ")}`,
      );
    }
    return { control, runtime: sup };
  } catch (e) {
    await control?.close();
    throw e;
  }
}

async function main(flags: Flags): Promise<number> {
  const s = await settings(flags);
  const { storage, mount, run } = s;
  const root = prepareStorage(flags, s);
  // Host provider configuration (limits, base URLs): read once, here, for the process's life;
  // a bad file is named and ignored, never fatal. Instances inherit CORTEXFS_PROVIDERS.
  const { hostConfig } = await import("../src/store/providers.ts");
  const host = hostConfig({ log: (l) => console.error(`cortexfsd: ${l}`) });
  const used = Object.keys(host.providers).length;
  if (used) console.error(`cortexfsd: ${used} provider file(s) from ${host.dir}`);
  const generation = currentName(storage) ?? "";
  // Held for the process lifetime: `ctx storage update` refuses to migrate, and --prune to remove,
  // a generation a running daemon serves. The kernel drops the lock however this process ends.
  const serving = holdServing(storage, generation);
  // Agents created or removed through the mount get (or lose) their socket at once: the mount
  // calls back here, no watcher. Until the runtime is up, its own startup scan finds them.
  // The mount is served by a worker thread that does nothing else: this thread (the runtime)
  // may block in a synchronous call into /ctx (a client's workspace under /ctx/home) and the
  // worker still answers it.
  // This thread is the host (startHost), started before the mount (once /ctx appears every
  // agent's socket answers: a script that waits for the mount and then sends is served; it used
  // to find no socket for up to 0.8 s), closed before unmount.
  // A live mount there is another daemon, whose sockets and instances the host's start would
  // take for a killed one's: refused (EBUSY) before anything is touched; a dead one is cleared.
  if (prepareMountpoint(mount) === "cleared") {
    console.error(`cortexfsd: cleared a dead mount left at ${mount} by a killed daemon`);
  }
  const { control, runtime } = await startHost(flags, s, root);
  console.error(`cortexfsd: agent sockets under ${run}/agent`);
  let handle: Awaited<ReturnType<typeof startMountThread>>;
  try {
    handle = await startMountThread({
      onAgent: (name) => runtime.serve(name),
      onAgentGone: (name) => runtime.unserve(name),
      root,
      storage,
      generation,
      mount,
      run,
      // From the built file the launchers exec that file (no checkout); from source, the checkout.
      bins: install.kind === "built" && install.exe
        ? launchers(checkout, permissions, {
          built: { exe: install.exe, programs: install.programs },
        })
        : launchers(checkout, permissions),
      ttl: s.ttl,
      debug: flags.debug,
      waitMs: flags.loopWait === undefined ? undefined : Number(flags.loopWait),
      priority: s.priority,
      fusermount: flags.fusermount,
      host,
    });
  } catch (e) {
    await control.close();
    await runtime.close();
    throw e;
  }
  console.error(`cortexfsd: serving generation ${generation} at ${mount} (${handle.mounted.via})`);
  console.error(`cortexfsd: the mount's serving thread: ${handle.sched}`);
  return await serveUntilEnd(handle, { control, runtime }, serving);
}

/** Waits for the mount to end (a signal's stop or an unmount from outside), then closes the host. */
async function serveUntilEnd(
  handle: Awaited<ReturnType<typeof startMountThread>>,
  { control, runtime }: Host,
  serving: { close(): void },
): Promise<number> {
  // Close the runtime exactly once, whichever way the mount ends (signal or external unmount).
  let closing: Promise<void> | undefined;
  const closeRuntime = () =>
    closing ??= (async () => {
      await control.close();
      await runtime.close();
    })();
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      await closeRuntime();
      await handle.stop();
    })();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  const why = await handle.done;
  await closeRuntime(); // unmounted from outside: a clean end too
  await stopping;
  serving.close();
  console.error(`cortexfsd: ${why}; exiting`);
  return EXIT.ok;
}

/** `cortexfsd instance NAME`: one agent's runtime instance, started by the host only. */
async function instance(
  name: string,
  o: { root: string; run: string; mount?: string; idleTimeout?: string; conn?: boolean },
): Promise<number> {
  const { runInstance } = await import("../src/runtime/instance.ts");
  return await runInstance({
    agent: name,
    root: o.root,
    run: o.run,
    mount: o.mount,
    idleMs: idleSeconds(o.idleTimeout) * 1000,
    toolCache: Deno.env.get("CTX_TOOL_CACHE"),
    approvalTimeoutMs: approvalMs(),
    env: Deno.env.toObject(),
    conn: o.conn,
  });
}

function fail(e: unknown): never {
  const err = toCtxError(e);
  console.error(`cortexfsd: ${err}`);
  // EBUSY: a live mount is there; ENOTSUP: the tree is not this binary's version. Both: unavailable.
  const unavailable = err.errno === "EBUSY" || err.errno === "ENOTSUP";
  Deno.exit(unavailable ? EXIT.unavailable : exitCode(err.errno));
}

if (import.meta.main) {
  const program = new Command()
    .name("cortexfsd")
    .description("Mount /ctx and serve it.")
    .version(`cortexfsd ${VERSION}`, "-V, --version", "print the version")
    .enablePositionalOptions() // `instance NAME --run R`: the instance's own --run, not the host's
    .option("--storage <dir>", "storage root (generations/, current)")
    .option("--mount <dir>", "mount point")
    .option("--run <dir>", "run directory for live sockets")
    .option("--dev", "development mode: all state under <checkout>/.dev/")
    .option("--debug", "print one rx/tx line per FUSE request")
    .option("--fusermount", "mount with fusermount3 (auto_unmount) even as root")
    .option("--ttl <seconds>", "entry/attr timeout for home/ and shared/ (default 1)")
    .option(
      "--loop-wait <ms>",
      "while a hook's answer is pending, wait this long for the next request on the serving thread before yielding to its event loop (default 1)",
    )
    .option(
      "--mount-priority <n>",
      "SCHED_RR priority (1-99) of the thread serving the mount while it uses under half a CPU (above, the ordinary policy), for low latency under CPU load; 0: always the ordinary policy (default 1)",
    )
    .option(
      "--idle-timeout <seconds>",
      "an agent instance with no connection and no run exits after this long (default 300; env CTX_IDLE_TIMEOUT)",
    )
    .option(
      "--start-timeout <seconds>",
      "an agent instance not ready this long after its start is stopped and recorded failed (default 30; env CTX_START_TIMEOUT)",
    )
    .option(
      "--supervisor <mode>",
      "auto (default): agent instances as systemd transient scopes where a manager answers, else the built-in supervisor; builtin; systemd (fail without a manager)",
    )
    .option(
      "--systemd-tools <dir>",
      "use <dir>/systemd-run and <dir>/systemctl as the manager's tools (an explicit override, for tests with fakes; never found by detection)",
    )
    .exitOverride((e) => Deno.exit(e.exitCode === 0 ? 0 : EXIT.usage))
    .action(async (flags: Flags) => {
      try {
        Deno.exit(await main(flags));
      } catch (e) {
        fail(e);
      }
    });
  program
    .command("instance")
    .description("one agent's runtime instance (started by cortexfsd with its socket as fd 3)")
    .argument("<name>", "agent name")
    .requiredOption("--root <dir>", "the generation directory")
    .requiredOption("--run <dir>", "the run directory")
    .option("--mount <dir>", "the mount projecting the tree")
    .option("--idle-timeout <seconds>", "exit after this long idle (default 300)")
    .option("--conn", "fd 5 is a connection the host accepted on the socket and admitted")
    .exitOverride((e) => Deno.exit(e.exitCode === 0 ? 0 : EXIT.usage))
    .action(
      async (
        name: string,
        o: { root: string; run: string; mount?: string; idleTimeout?: string; conn?: boolean },
      ) => {
        try {
          Deno.exit(await instance(name, o));
        } catch (e) {
          fail(e);
        }
      },
    );
  await program.parseAsync(["deno", "cortexfsd", ...Deno.args]);
}
