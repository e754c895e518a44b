/** Test fixtures: a fresh storage tree (the real initial tree), a running cortexfsd on a temp mount. */
import { update } from "../../src/store/generation.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const checkout = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** The checkout's pinned Deno launcher. */
export const DENO = `${checkout}/tools/deno`;
/** cortexfsd's entry file. */
export const CORTEXFSD = `${checkout}/cli/cortexfsd.ts`;

/** A temp dir with `storage/` (the initial tree, owned by `uid`), `mnt/` and `run/`. */
export async function makeTree(options: { uid?: number; gid?: number } = {}): Promise<{
  dir: string;
  storage: string;
  mount: string;
  run: string;
  root: string;
}> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-fuse-" });
  await Deno.chmod(dir, 0o755); // other uids (setpriv tests) must reach the mount point
  const storage = `${dir}/storage`, mount = `${dir}/mnt`, run = `${dir}/run`;
  await Deno.mkdir(mount);
  await Deno.mkdir(run);
  update(storage, { uid: options.uid ?? 0, gid: options.gid ?? 0 });
  return { dir, storage, mount, run, root: Deno.realPathSync(`${storage}/current`) };
}

/** A cortexfsd child process serving a tree. */
export interface Daemon {
  child: Deno.ChildProcess;
  mount: string;
  /** Collected stderr so far. */
  log(): string;
  /** SIGTERM, then wait; returns the exit code. */
  stop(): Promise<number>;
}

/** Waits until `cond()` holds (polling every 20 ms) or throws after `ms`. */
export async function until(cond: () => boolean, what: string, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts `cortexfsd` on `tree` and waits until the mount is live and the agent sockets are up. */
export async function startDaemon(
  tree: { storage: string; mount: string; run: string },
  options: {
    args?: string[];
    wait?: boolean;
    /** A command prefix cortexfsd runs under (e.g. `bash -c 'umask 0; exec "$@"' umask0`). */
    wrap?: string[];
  } = {},
): Promise<Daemon> {
  const [cmd, ...pre] = [...(options.wrap ?? []), DENO];
  const child = new Deno.Command(cmd, {
    args: [
      ...pre,
      "run",
      "-A",
      CORTEXFSD,
      "--storage",
      tree.storage,
      "--mount",
      tree.mount,
      "--run",
      tree.run,
      ...(options.args ?? []),
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  const dec = new TextDecoder();
  const pump = (async () => {
    for await (const chunk of child.stderr) log += dec.decode(chunk);
  })();
  let exited: number | null = null;
  const status = child.status.then((s) => (exited = s.code));
  const d: Daemon = {
    child,
    mount: tree.mount,
    log: () => log,
    async stop() {
      if (exited === null) {
        try {
          child.kill("SIGTERM");
        } catch { /* already gone */ }
      }
      const code = await status;
      await pump;
      return code;
    },
  };
  if (options.wait !== false) {
    await until(
      // The runtime starts after the mount and changes what it shows (agents' status, pid):
      // tests see the daemon once both are up, not in between.
      () =>
        exited !== null ||
        (mountedType(tree.mount) !== null && log.includes("agent sockets under")),
      "the mount and the agent sockets",
    );
    if (exited !== null) throw new Error(`cortexfsd exited ${exited}: ${log}`);
  }
  return d;
}

/** Best-effort cleanup: lazy-unmount whatever is still mounted at `mount`, remove `dir`. */
export async function cleanup(
  d: Daemon | null,
  tree: { dir: string; mount: string },
): Promise<void> {
  if (d) await d.stop().catch(() => {});
  if (mountedType(tree.mount) !== null) {
    await new Deno.Command("umount", { args: ["-l", tree.mount] }).output();
  }
  await Deno.remove(tree.dir, { recursive: true }).catch(() => {});
}

/** Runs a command (bash -c by default); returns exit code, stdout, stderr. */
export async function sh(
  script: string,
  options: { uid?: number; cwd?: string; stdin?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const args = options.uid === undefined
    ? ["-c", script]
    : [`--reuid=${options.uid}`, `--regid=${options.uid}`, "--clear-groups", "bash", "-c", script];
  const cmd = new Deno.Command(options.uid === undefined ? "bash" : "setpriv", {
    args,
    cwd: options.cwd,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  });
  const child = cmd.spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/**
 * The system python3 (reachable by every uid), or null when absent: tests needing it are ignored
 * (reported as such), except under CI, which installs it: there a missing python3 fails them.
 */
export const PYTHON = (() => {
  const path = "/usr/bin/python3";
  try {
    if (Deno.statSync(path).isFile) return path;
  } catch { /* absent */ }
  return Deno.env.get("CI") ? path : null;
})();

/** The uids the home/shared conformance tests run as: root, and a second user with its own home. */
export const UIDS = [0, 1000] as const;

/**
 * Runs `fn` against a live mount of a fresh tree; `home(uid)` is `home/<uid>` on the mount, made
 * by that uid through the mount on first use (as a user makes its own). Always unmounts.
 */
export async function withMount(
  fn: (m: {
    tree: Awaited<ReturnType<typeof makeTree>>;
    daemon: Daemon;
    home: (uid: number) => Promise<string>;
  }) => Promise<void>,
): Promise<void> {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const home = async (uid: number) => {
      const h = `${tree.mount}/home/${uid}`;
      const r = await sh(`test -d ${h} || mkdir ${h}`, { uid });
      if (r.code !== 0) throw new Error(`mkdir ${h} as ${uid}: ${r.stderr}`);
      return h;
    };
    await fn({ tree, daemon: d, home });
  } finally {
    await cleanup(d, tree);
  }
}

if (import.meta.main) {
  // `tools/deno run -A tests/fuse/fixture.ts DIR`: makes an initial tree at DIR/storage.
  update(`${Deno.args[0]}/storage`, {});
}
