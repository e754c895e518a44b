/**
 * Stat latency under load: another process stats `<mount>/status` and a `home/` file once a ms,
 * first with the daemon idle, then while one agent streams 20,000 deltas and another runs 20 tool
 * calls through the same cortexfsd; in the same loop a file through libfuse's passthrough_ll with
 * nothing cached (a userspace server's share of the same load) and one on tmpfs (the kernel's).
 * Prints p50/p99/max of each phase, the ratio to idle and to each reference under load.
 * Never asserts a duration. Run: tools/deno run -A bench/fuse/load.ts [--deltas 20000] [--calls 20]; `status` is served
 * at the ordinary policy (cortexfsd's default), `status RR 1` by a second cortexfsd at SCHED_RR 1.
 */
import { cleanup, CTX, type Daemon, DENO, makeTree, startDaemon } from "../../tests/fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const DELTAS = arg("--deltas", 20000), CALLS = arg("--calls", 20);

const HERE = new URL(".", import.meta.url).pathname;

/** libfuse's own low-level example (Debian libfuse3-dev), compiled in the run, never copied. */
const PTLL_SRC = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c";

async function gcc(args: string[]): Promise<void> {
  const out = await new Deno.Command("gcc", { args: ["-O2", ...args] }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
}

/** Compiles bench/fuse/client.c (its `lat` mode: paced stat(2) latencies) into `dir`. */
async function client(dir: string): Promise<string> {
  await gcc(["-o", `${dir}/client`, `${HERE}client.c`]);
  return `${dir}/client`;
}

/**
 * passthrough_ll (multi-threaded) over `back` at `mnt` with entry and attribute timeouts 0: a stat
 * of a file there costs the same LOOKUP + GETATTR round trips to a userspace server as a stat of
 * `/ctx/status`, so under the same load it shows what any FUSE server's thread pays for CPU.
 */
async function passthroughLl(dir: string, back: string, mnt: string): Promise<Deno.ChildProcess> {
  const flags = new TextDecoder().decode(
    (await new Deno.Command("pkg-config", { args: ["--cflags", "--libs", "fuse3"] }).output())
      .stdout,
  ).trim().split(/\s+/);
  await gcc(["-o", `${dir}/ptll`, PTLL_SRC, ...flags]);
  const child = new Deno.Command(`${dir}/ptll`, {
    args: ["-f", "-o", `source=${back},timeout=0,cache=never`, mnt],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const dev = Deno.statSync(dir).dev;
  // Mounted once the mount point is another filesystem's root.
  for (let i = 0; Deno.statSync(mnt).dev === dev; i++) {
    if (i > 3000) throw new Error("passthrough_ll did not mount");
    await new Promise((r) => setTimeout(r, 10));
  }
  return child;
}

/**
 * Stats the paths (one stat(2) each per millisecond, from one long-lived process: the syscall is
 * timed, not a fork and exec) until `phase()` settles; returns the latencies (ns) per path.
 */
async function sample(
  bin: string,
  paths: string[],
  stop: string,
  phase: () => Promise<void>,
): Promise<Record<string, number[]>> {
  const child = new Deno.Command(bin, { args: ["lat", stop, ...paths], stdout: "piped" }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("ready\n")) text += (await reader.read()).value ?? "";
  text = text.slice(text.indexOf("ready\n") + 6);
  const rest = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
  })();
  await phase();
  Deno.writeTextFileSync(stop, "");
  await rest;
  if (!(await child.status).success) throw new Error("a stat failed");
  const out: Record<string, number[]> = Object.fromEntries(paths.map((p) => [p, []]));
  for (const line of text.trim().split("\n")) {
    const [i, t] = line.split(" ");
    out[paths[Number(i)]]?.push(Number(t));
  }
  return out;
}

function stats(ns: number[]) {
  const s = [...ns].sort((a, b) => a - b);
  const q = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))] / 1e6;
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s[s.length - 1] / 1e6 };
}

const tree = await makeTree();
// A second cortexfsd, its serving thread at SCHED_RR 1 (`--mount-priority 1`), stat'ed in the same
// loop under the same load (the load runs through the first one's agents): both policies in one run.
const rrTree = await makeTree();
let d: Daemon | null = null;
let rr: Daemon | null = null;
let ptll: Deno.ChildProcess | null = null;
const ptMnt = `${tree.dir}/ptll-mnt`;
try {
  // The flood agent: one delta frame per line, then its message.
  const flood = `${tree.dir}/flood.sh`;
  Deno.writeTextFileSync(
    flood,
    `#!/bin/bash\nread -r _\nfor ((i = 0; i < ${DELTAS}; i++)); do printf '{"type":"delta","text":"w%d "}\\n' $i; done\n` +
      `printf '{"type":"message","role":"assistant","content":"flooded"}\\n'\n`,
  );
  createAgent(tree.root, "flood", { uid: 0, gid: 0, exec: flood });
  const bin = await client(tree.dir);
  d = await startDaemon(tree);
  rr = await startDaemon(rrTree, { args: ["--mount-priority", "1"] });
  const home = `${tree.mount}/home/0/bench.txt`;
  Deno.writeTextFileSync(home, "x\n");
  // The reference in the same loop: a file on tmpfs, off the mount. Its latency under load is what
  // the machine itself adds (a 2-core VM: the flood and the tool calls' processes compete for
  // the CPU with the stat processes); the mount's own share is the ratio to it.
  const ref = `/dev/shm/cortexfs-load-${Deno.pid}`;
  Deno.writeTextFileSync(ref, "x\n");
  // And a file through libfuse's passthrough_ll with nothing cached: a userspace server's share.
  Deno.mkdirSync(`${tree.dir}/ptll-back`);
  Deno.mkdirSync(ptMnt);
  Deno.writeTextFileSync(`${tree.dir}/ptll-back/f`, "x\n");
  ptll = await passthroughLl(tree.dir, `${tree.dir}/ptll-back`, ptMnt);
  const pt = `${ptMnt}/f`;
  const rrStatus = `${rrTree.mount}/status`;
  const paths = [`${tree.mount}/status`, rrStatus, home, pt, ref];
  const ctx = (args: string[]) =>
    new Deno.Command(DENO, {
      args: ["run", "-A", "--quiet", CTX, ...args],
      cwd: tree.dir,
      env: { CTX_ROOT: tree.mount },
      stdout: "null",
      stderr: "null",
    }).output();
  const idle = await sample(bin, paths, `${tree.dir}/stop-idle`, async () => {
    for (let i = 0; i < 400; i++) await new Promise((r) => setTimeout(r, 5));
  });
  let floodMs = 0;
  const load = await sample(bin, paths, `${tree.dir}/stop-load`, async () => {
    const t = performance.now();
    await Promise.all([
      ctx(["agent", "send", "flood", "go"]).then(() => floodMs = performance.now() - t),
      (async () => {
        for (let i = 0; i < CALLS; i++) await ctx(["agent", "tsh", "coder", "--", "fs.stat", "."]);
      })(),
    ]);
  });
  console.log(
    `stat latency, idle vs one agent streaming ${DELTAS} deltas (${
      floodMs.toFixed(0)
    } ms) + ${CALLS} tool calls`,
  );
  const u = stats(load[pt]);
  for (const p of paths) {
    const i = stats(idle[p]), l = stats(load[p]);
    const name = p === ref
      ? "tmpfs (ref)"
      : p === pt
      ? "passthrough_ll"
      : p === rrStatus
      ? "status RR 1"
      : p.slice(tree.mount.length + 1);
    const f = (v: number) => v.toFixed(2).padStart(7);
    console.log(
      `${name.padEnd(16)} idle n=${i.n} p50 ${f(i.p50)} p99 ${f(i.p99)} max ${f(i.max)} ms | ` +
        `load n=${l.n} p50 ${f(l.p50)} p99 ${f(l.p99)} max ${f(l.max)} ms | p99 ${
          (l.p99 / i.p99).toFixed(2)
        }x idle; under load p99 ${(l.p99 / u.p99).toFixed(2)}x passthrough_ll, max ${
          (l.max / u.max).toFixed(2)
        }x`,
    );
  }
  Deno.removeSync(ref);
} finally {
  if (ptll) {
    await new Deno.Command("fusermount3", { args: ["-u", ptMnt] }).output();
    await ptll.status;
  }
  await cleanup(rrTree, rr);
  await cleanup(tree, d);
}
