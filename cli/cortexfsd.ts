/** cortexfsd: mounts /ctx (the FUSE projection of the current storage generation) and serves it. */
import { Command } from "commander";
import { CtxError, EXIT, exitCode, toCtxError } from "../src/abi/errno.ts";
import { VERSION } from "../src/abi/version.ts";
import { ensureDir } from "../src/store/atomic.ts";
import { readBootstrap } from "../src/store/bootstrap.ts";
import { currentGeneration, currentName, update } from "../src/store/generation.ts";
import { latestVersion, MIGRATIONS } from "../src/store/migrate.ts";
import { resolvePaths } from "../src/store/paths.ts";
import { holdServing } from "../src/store/serving.ts";
import { launchers, mountedType, startMountThread } from "../src/fuse/mod.ts";
import permissions from "../packaging/permissions.json" with { type: "json" };
import { self } from "../packaging/self.ts";

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

async function main(flags: Flags): Promise<number> {
  if (flags.dev && install.kind === "built") {
    throw new CtxError(
      "EINVAL",
      "--dev needs a checkout; the built file keeps state where --storage, --mount and --run say",
    );
  }
  const paths = resolvePaths({ dev: flags.dev ? checkout : undefined, env: Deno.env.toObject() });
  const storage = flags.storage ?? paths.storage;
  const mount = flags.mount ?? paths.mount;
  const run = flags.run ?? paths.run;
  const ttl = flags.ttl === undefined ? 1 : Number(flags.ttl);
  if (!Number.isFinite(ttl) || ttl < 0) {
    throw new CtxError(
      "EINVAL",
      `--ttl must be a non-negative number of seconds, not "${flags.ttl}"`,
    );
  }
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
  if (install.kind === "built" && Deno.uid() === 0) {
    // Other users reach this install twice: their agents' sandboxes bind the unpacked runtime,
    // and /ctx/bin's launchers exec the file itself.
    const lib = unreachable(install.lib, ["deno", "tsh.js"]);
    if (lib) {
      console.error(
        `cortexfsd: warning: ${lib}: the sandboxes of other users' agents bind the runtime from ` +
          "there and cannot reach it; unset CORTEXFS_CACHE (root's default is /var/cache/cortexfs)",
      );
    }
    const exe = install.exe && unreachable(install.exe.replace(/\/[^/]*$/, "") || "/", [
      install.exe.replace(/^.*\//, ""),
    ], { exec: true });
    if (exe) {
      console.error(
        `cortexfsd: warning: ${exe}: /ctx/bin's launchers exec it, so other users cannot; ` +
          "install it first (`sudo cortexfs install` puts it in /usr/local/bin)",
      );
    }
  }
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
  const generation = currentName(storage) ?? "";
  // Held for the process lifetime: `ctx storage update` refuses to migrate, and --prune to remove,
  // a generation a running daemon serves. The kernel drops the lock however this process ends.
  const serving = holdServing(storage, generation);
  // Agents created or removed through the mount get (or lose) their socket at once: the mount
  // calls back here, no watcher. Until the runtime is up, its own startup scan finds them.
  // The mount is served by a worker thread that does nothing else: this thread (the runtime)
  // may block in a synchronous call into /ctx (a client's workspace under /ctx/home) and the
  // worker still answers it.
  let runtime: {
    close(): Promise<void>;
    serve(n: string): Promise<string>;
    unserve(n: string): Promise<void>;
  } | null = null;
  const handle = await startMountThread({
    onAgent: (name) => runtime?.serve(name),
    onAgentGone: (name) => runtime?.unserve(name),
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
    ttl,
    debug: flags.debug,
    waitMs: flags.loopWait === undefined ? undefined : Number(flags.loopWait),
    fusermount: flags.fusermount,
  });
  console.error(`cortexfsd: serving generation ${generation} at ${mount} (${handle.mounted.via})`);

  // The socket runtime works on the backing generation; client paths (workspaces) may still lead
  // into /ctx, which is fine off the serving thread. Started after the mount, closed before unmount.
  try {
    const { startRuntime } = await import("../src/runtime/mod.ts");
    runtime = await startRuntime({ root, run, mount, toolCache: Deno.env.get("CTX_TOOL_CACHE") });
  } catch (e) {
    await handle.stop();
    throw e;
  }
  console.error(`cortexfsd: agent sockets under ${run}/agent`);

  // Close the runtime exactly once, whichever way the mount ends (signal or external unmount).
  let closing: Promise<void> | undefined;
  const closeRuntime = () => closing ??= runtime?.close() ?? Promise.resolve();
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

if (import.meta.main) {
  const program = new Command()
    .name("cortexfsd")
    .description("Mount /ctx and serve it.")
    .version(`cortexfsd ${VERSION}`, "-V, --version", "print the version")
    .option("--storage <dir>", "storage root (generations/, current)")
    .option("--mount <dir>", "mount point")
    .option("--run <dir>", "run directory for live sockets")
    .option("--dev", "development mode: all state under <checkout>/.dev/")
    .option("--debug", "print one rx/tx line per FUSE request")
    .option("--fusermount", "mount with fusermount3 (auto_unmount) even as root")
    .option("--ttl <seconds>", "entry/attr timeout for home/ and shared/ (default 1)")
    .option(
      "--loop-wait <ms>",
      "wait for the next request on the JS thread before yielding (default 1)",
    )
    .exitOverride((e) => Deno.exit(e.exitCode === 0 ? 0 : EXIT.usage))
    .parse(["deno", "cortexfsd", ...Deno.args]);
  try {
    Deno.exit(await main(program.opts<Flags>()));
  } catch (e) {
    const err = toCtxError(e);
    console.error(`cortexfsd: ${err}`);
    // EBUSY: a live mount is there; ENOTSUP: the tree is not this binary's version. Both: unavailable.
    const unavailable = err.errno === "EBUSY" || err.errno === "ENOTSUP";
    Deno.exit(unavailable ? EXIT.unavailable : exitCode(err.errno));
  }
}
