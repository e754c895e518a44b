/**
 * Start-up cost of the CLI against Deno's own floor, every case interleaved in one run: `ctx
 * status` against `deno eval ''` (goal: at most 1.3x) and `ctx agent send` (to the model-backed
 * `coder`, debug/echo) against a bare `deno run` of a hello (goal: at most 2x), each from the
 * built single file and from the checkout (the pinned deno run directly on cli/ctx.ts, not through
 * tools/deno, a bash wrapper whose own start would be measured too); `ctx --version` as well. The
 * sends go as a user's do: to a real cortexfsd (tests/fixture startDaemon) through its mount
 * (CTX_ROOT = the mount), host socket -> the agent's instance, started by the warm-up send. Wall
 * medians are the measure (end to end); each case's mean CPU (user+sys of the child, from
 * /proc/self/stat) is printed beside it, the steadier number on a busy machine. Also the single
 * file's size and its first run (unpack into an empty cache). Never asserts a duration.
 */
import { buildSingle } from "../../packaging/single.ts";
import { programs } from "../../packaging/build.ts";
import { cleanup, makeTree, startDaemon } from "../../tests/fixture/mod.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 20);
const REPO = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** CPU ms of this process's reaped children so far (cutime + cstime, in clock ticks of 10 ms). */
function childrenCpu(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3 (state)
  return (Number(f[13]) + Number(f[14])) * 10; // fields 16 and 17
}

const tree = await makeTree();
const tmp = tree.dir;
// The instance must outlive the whole run: its first start is the warm-up, not a sample.
const daemon = await startDaemon(tree, { args: ["--idle-timeout", "3600"] });
const root = tree.mount;
try {
  const t0 = performance.now();
  const built = await buildSingle({ out: `${tmp}/cortexfs`, programs: programs() });
  const buildMs = performance.now() - t0;
  Deno.writeTextFileSync(`${tmp}/hello.js`, `console.log("hello");\n`);
  Deno.mkdirSync(`${tmp}/home`);
  const env = {
    HOME: `${tmp}/home`,
    PATH: "/usr/bin:/bin",
    NO_COLOR: "1",
    CTX_ROOT: root,
    CORTEXFS_CACHE: `${tmp}/cache`,
  };
  const time = async (argv: string[], extra: Record<string, string> = {}) => {
    const c = childrenCpu();
    const t = performance.now();
    const o = await new Deno.Command(argv[0], {
      args: argv.slice(1),
      clearEnv: true,
      env: { ...env, ...extra },
      cwd: tmp,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const ms = performance.now() - t;
    if (!o.success) {
      throw new Error(`${argv.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
    }
    return { ms, cpu: childrenCpu() - c };
  };

  // First runs: each into an empty cache (the payload checked and unpacked), then a warm one.
  const first: number[] = [];
  for (let i = 0; i < 3; i++) {
    first.push(
      (await time([built.path, "--version"], { CORTEXFS_CACHE: `${tmp}/first-${i}` })).ms,
    );
    Deno.removeSync(`${tmp}/first-${i}`, { recursive: true });
  }

  const deno = Deno.execPath();
  const checkout = [deno, "run", "-A", "--quiet", `${REPO}/cli/ctx.ts`];
  const file = [built.path, "ctx"];
  const send = ["agent", "send", "coder", "hi"];
  const cases: Record<string, string[]> = {
    "deno eval ''": [deno, "eval", ""],
    "deno run hello.js": [deno, "run", "--quiet", `${tmp}/hello.js`],
    "checkout: ctx status": [...checkout, "status"],
    "built: ctx status": [...file, "status"],
    "checkout: ctx agent send": [...checkout, ...send],
    "built: ctx agent send": [...file, ...send],
    "checkout: ctx --version": [...checkout, "--version"],
    "built: ctx --version": [...file, "--version"],
  };
  // The checkout and the references run as a developer's do: the Deno cache (HOME, DENO_DIR)
  // already filled. The built file runs with an empty HOME (its own cache, warmed below).
  const desk: Record<string, string> = { HOME: Deno.env.get("HOME") ?? "/root" };
  const denoDir = Deno.env.get("DENO_DIR");
  if (denoDir) desk.DENO_DIR = denoDir;
  const envOf = (k: string) => k.startsWith("built") ? {} : desk;
  const walls: Record<string, number[]> = Object.fromEntries(
    Object.keys(cases).map((k) => [k, []]),
  );
  const cpus: Record<string, number> = Object.fromEntries(Object.keys(cases).map((k) => [k, 0]));
  for (const [k, argv] of Object.entries(cases)) await time(argv, envOf(k)); // warm-up
  for (let i = 0; i < N; i++) {
    for (const [k, argv] of Object.entries(cases)) {
      const r = await time(argv, envOf(k));
      walls[k].push(r.ms);
      cpus[k] += r.cpu;
    }
  }
  const wall = (k: string) => mid(walls[k]);
  const cpu = (k: string) => cpus[k] / N;
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(
    `single file: ${(built.size / 1048576).toFixed(1)} MiB (header ${built.header} B), ` +
      `built in ${(buildMs / 1000).toFixed(1)} s`,
  );
  console.log(`first run (check + unpack + cortexfs --version): ${first.map(ms).join(", ")}`);
  console.log(`${N} interleaved runs of each: median wall, mean CPU`);
  for (const k of Object.keys(cases)) {
    console.log(`  ${k.padEnd(26)} ${ms(wall(k)).padStart(9)}  cpu ${ms(cpu(k)).padStart(9)}`);
  }
  const x = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  const goal = (what: string, ref: string, limit: number) => {
    const parts = ["checkout", "built"].map((w) => {
      const k = `${w}: ${what}`;
      const r = wall(k) / wall(ref);
      return `${w} ${x(wall(k), wall(ref))} ${r <= limit ? "(met)" : "(not met)"}, cpu ${
        x(cpu(k), cpu(ref))
      }`;
    });
    console.log(`goal: ${what} <= ${limit}x ${ref}: ${parts.join("; ")}`);
  };
  goal("ctx status", "deno eval ''", 1.3);
  goal("ctx agent send", "deno run hello.js", 2);
  console.log(
    `ctx --version / deno run hello.js: checkout ${
      x(wall("checkout: ctx --version"), wall("deno run hello.js"))
    }, built ${x(wall("built: ctx --version"), wall("deno run hello.js"))}`,
  );
} finally {
  await cleanup(tree, daemon);
}
