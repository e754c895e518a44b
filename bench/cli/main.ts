/**
 * Start-up cost of the CLI: `ctx --version` and `ctx agent send` (to the model-backed `coder`,
 * debug/echo) from the built single file vs `tools/deno run` from the checkout, against the Deno
 * floor (`deno run` of an empty file), all interleaved in one run. Also the single file's size,
 * its first run (unpack into an empty cache) and a warm `cortexfs --version`.
 * Prints medians and ratios; never asserts a duration.
 */
import { buildSingle } from "../../packaging/single.ts";
import { programs } from "../../packaging/build.ts";
import { startRuntime } from "../../src/runtime/mod.ts";
import { makeTree, REPO } from "../../tests/fixture/mod.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 20);

function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const tmp = await Deno.makeTempDir({ prefix: "cortexfs-bench-cli-" });
const f = await makeTree();
const rt = await startRuntime({ root: f.root, run: f.run });
try {
  const t0 = performance.now();
  const built = await buildSingle({ out: `${tmp}/cortexfs`, programs: programs() });
  const buildMs = performance.now() - t0;
  Deno.writeTextFileSync(`${tmp}/empty.js`, "");
  Deno.mkdirSync(`${tmp}/home`);
  const env = {
    HOME: `${tmp}/home`,
    PATH: "/usr/bin:/bin",
    NO_COLOR: "1",
    CTX_ROOT: f.root,
    CORTEXFS_CACHE: `${tmp}/cache`,
  };
  const time = async (argv: string[], extra: Record<string, string> = {}) => {
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
    return ms;
  };

  // First runs: each into an empty cache (the payload checked and unpacked), then a warm one.
  const first: number[] = [];
  for (let i = 0; i < 3; i++) {
    first.push(await time([built.path, "--version"], { CORTEXFS_CACHE: `${tmp}/first-${i}` }));
    Deno.removeSync(`${tmp}/first-${i}`, { recursive: true });
  }

  const deno = Deno.execPath();
  const cases: Record<string, string[]> = {
    "floor: deno run empty.js": [deno, "run", "--quiet", `${tmp}/empty.js`],
    "built: ctx --version": [built.path, "ctx", "--version"],
    "checkout: ctx --version": [
      `${REPO}/tools/deno`,
      "run",
      "-A",
      "--quiet",
      `${REPO}/cli/ctx.ts`,
      "--version",
    ],
    "built: ctx agent send": [built.path, "ctx", "agent", "send", "coder", "hi"],
    "checkout: ctx agent send": [
      `${REPO}/tools/deno`,
      "run",
      "-A",
      "--quiet",
      `${REPO}/cli/ctx.ts`,
      "agent",
      "send",
      "coder",
      "hi",
    ],
  };
  // The checkout runs as a developer's does: its Deno cache (HOME, DENO_DIR) already filled.
  const desk: Record<string, string> = { HOME: Deno.env.get("HOME") ?? "/root" };
  const denoDir = Deno.env.get("DENO_DIR");
  if (denoDir) desk.DENO_DIR = denoDir;
  const envOf = (k: string) => k.startsWith("built") ? {} : desk;
  const xs: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  for (const [k, argv] of Object.entries(cases)) await time(argv, envOf(k)); // warm-up
  for (let i = 0; i < N; i++) {
    for (const [k, argv] of Object.entries(cases)) xs[k].push(await time(argv, envOf(k)));
  }
  const m = Object.fromEntries(Object.entries(xs).map(([k, v]) => [k, mid(v)]));
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(
    `single file: ${(built.size / 1048576).toFixed(1)} MiB (header ${built.header} B), ` +
      `built in ${(buildMs / 1000).toFixed(1)} s`,
  );
  console.log(`first run (check + unpack + cortexfs --version): ${first.map(ms).join(", ")}`);
  for (const [k, v] of Object.entries(m)) console.log(`${k.padEnd(28)} ${ms(v)} (median of ${N})`);
  const floor = m["floor: deno run empty.js"];
  const r = (a: string, b: string) => (m[a] / m[b]).toFixed(2);
  console.log(
    `ratio built/checkout: --version ${r("built: ctx --version", "checkout: ctx --version")}, ` +
      `agent send ${r("built: ctx agent send", "checkout: ctx agent send")}`,
  );
  console.log(
    `ratio to the floor: built --version ${(m["built: ctx --version"] / floor).toFixed(2)}, ` +
      `built send ${(m["built: ctx agent send"] / floor).toFixed(2)}, checkout --version ${
        (m["checkout: ctx --version"] / floor).toFixed(2)
      }, checkout send ${(m["checkout: ctx agent send"] / floor).toFixed(2)}`,
  );
} finally {
  await rt.close();
  await Deno.remove(f.dir, { recursive: true });
  await Deno.remove(tmp, { recursive: true });
}
