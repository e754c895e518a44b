/** Fixtures of the attack suite: a real cortexfsd, `ctx` run as any uid from any cwd, and a bystander probe, every wait bounded. */
import { assertEquals } from "../assert.ts";
import { cleanup, type Daemon, DENO, makeTree, startDaemon } from "../fuse/fixture.ts";
import { nobodyDenoDir } from "../ctx/run.ts";

/** The checkout's `ctx` entry. */
export const CTX = new URL("../../cli/ctx.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** A hang is a failure after this long, never a stalled suite. */
export const BOUND_MS = 30_000;

/** What a bounded child run gave. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `argv` (as `uid` via setpriv when given, `stdin` fed) to completion; SIGKILLed and an error after `ms`. */
export async function run(
  argv: string[],
  options: {
    uid?: number;
    cwd?: string;
    env?: Record<string, string>;
    ms?: number;
    stdin?: string;
  } = {},
): Promise<Ran> {
  const full = options.uid === undefined ? argv : [
    "setpriv",
    `--reuid=${options.uid}`,
    `--regid=${options.uid}`,
    "--clear-groups",
    "--",
    ...argv,
  ];
  const child = new Deno.Command(full[0], {
    args: full.slice(1),
    cwd: options.cwd,
    env: options.env,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin)).catch(() => {});
    await w.close().catch(() => {});
  }
  const out = child.output();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ms = options.ms ?? BOUND_MS;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), ms));
  try {
    const o = await Promise.race([out, late]);
    if (o === "late") {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await out.catch(() => {});
      throw new Error(`${argv.join(" ")} did not finish within ${ms} ms`);
    }
    const dec = new TextDecoder();
    return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

/** A running cortexfsd on a fresh tree, with what the attack tests need. */
export interface Target {
  tree: Awaited<ReturnType<typeof makeTree>>;
  daemon: Daemon;
  /** `ctx ARGS` against the mount, as `uid` (default root) from `cwd`. */
  ctx(
    args: string[],
    options?: { uid?: number; cwd?: string; ms?: number; stdin?: string },
  ): Promise<Ran>;
  /** Another user's `stat` of `<mount>/status`: must complete within the bound, exit 0. */
  bystander(): Promise<void>;
}

/** Options for {@link withTarget}. */
export interface TargetOptions {
  /** Lays out the tree instead of the default `makeTree()` (custom layouts such as dev mode's). */
  tree?: () => Promise<Target["tree"]>;
  /** Runs on the fresh tree before cortexfsd starts (agents made in the backing tree, ...). */
  setup?: (tree: Target["tree"]) => void | Promise<void>;
  /** A command prefix cortexfsd runs under (see startDaemon's `wrap`). */
  wrap?: string[];
}

/** Starts cortexfsd on a fresh tree (or the one `options.tree` lays out) and runs `fn`; always stops, unmounts and removes `tree.dir` after. */
export async function withTarget(
  fn: (t: Target) => Promise<void>,
  options: TargetOptions = {},
): Promise<void> {
  const tree = await (options.tree ?? makeTree)();
  let daemon: Daemon | null = null;
  // A uid other than root cannot read root's Deno cache: it gets a private copy, made once.
  const denoDirs = new Map<number, string>();
  const denoDir = (uid: number) => {
    let d = denoDirs.get(uid);
    if (d === undefined) denoDirs.set(uid, d = nobodyDenoDir(uid));
    return d;
  };
  try {
    await options.setup?.(tree);
    daemon = await startDaemon(tree, { wrap: options.wrap });
    const t: Target = {
      tree,
      daemon,
      ctx: (args, o = {}) =>
        run([DENO, "run", "-A", "--quiet", "--config", CONFIG, CTX, ...args], {
          uid: o.uid,
          cwd: o.cwd ?? tree.dir,
          env: {
            CTX_ROOT: tree.mount,
            PATH: "/usr/bin:/bin",
            HOME: "/tmp",
            ...(o.uid ? { DENO_DIR: denoDir(o.uid) } : {}),
          },
          ms: o.ms,
          stdin: o.stdin,
        }),
      async bystander() {
        const r = await run(["stat", "-c", "%s", `${tree.mount}/status`], {
          uid: 65534,
          ms: 10_000,
        });
        assertEquals(r.code, 0, `bystander stat failed: ${r.stderr}`);
      },
    };
    await fn(t);
  } finally {
    await cleanup(daemon, tree);
    for (const d of denoDirs.values()) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
}

/**
 * bash helpers for probe scripts, so a tool's findings come back as whole lines to compare:
 * `can NAME CMD...` prints `NAME: yes` when CMD succeeds, else `NAME: no`; `err NAME CMD...` prints
 * `NAME: ok` when it succeeds, else the last part of its error message (`Read-only file system`).
 */
export const PROBES = [
  'can() { local n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: yes"; else echo "$n: no"; fi; }',
  'err() { local n=$1; shift; local o; if o=$("$@" 2>&1); then echo "$n: ok"; else o=${o%%$\'\\n\'*}; echo "$n: ${o##*: }"; fi; }',
].join("\n");

/**
 * Runs `script` (after {@link PROBES}) with tsh's bash in the default agent `coder`, the client's
 * cwd being `cwd`; the script must exit 0 (it reports, it does not fail). Returns its output lines.
 */
export async function probe(t: Target, script: string, cwd: string): Promise<string[]> {
  const r = await t.ctx(["agent", "tsh", "coder", "--", "bash", `${PROBES}\n${script}`], { cwd });
  assertEquals({ code: r.code, stderr: r.stderr }, { code: 0, stderr: "" }, r.stdout);
  return r.stdout.split("\n").filter((l) => l !== "");
}

/** `s` quoted for a bash script. */
export const q = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;
