/**
 * Stat latency under load: another process stats `<mount>/status` and a `home/` file in a loop,
 * first with the daemon idle, then while one agent streams 20,000 deltas and another runs 20 tool
 * calls through the same cortexfsd. Prints p50/p99/max of each phase and the ratio to idle.
 * Never asserts a duration. Run: tools/deno run -A bench/fuse/load.ts [--deltas 20000] [--calls 20]
 */
import { cleanup, CTX, type Daemon, DENO, makeTree, startDaemon } from "../../tests/fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const DELTAS = arg("--deltas", 20000), CALLS = arg("--calls", 20);

// One latency (us) per line for each path, until the stop file appears (then a few more).
const LOOP = `
a=$1; b=$2; c=$3; stop=$4; n=0
echo ready
while :; do
  for p in "$a" "$b" "$c"; do
    t0=\${EPOCHREALTIME/./}; stat -c %s "$p" >/dev/null || echo fail; t1=\${EPOCHREALTIME/./}
    echo "$p $((t1 - t0))"
  done
  [ -e "$stop" ] && n=$((n + 1))
  [ "$n" -ge 5 ] && break
done
`;

/** Stats both paths until `phase()` settles; returns the latencies (us) per path. */
async function sample(
  paths: [string, string, string],
  stop: string,
  phase: () => Promise<void>,
): Promise<Record<string, number[]>> {
  const child = new Deno.Command("bash", {
    args: ["-c", LOOP, "load", ...paths, stop],
    stdout: "piped",
  }).spawn();
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
  await child.status;
  if (text.includes("fail")) throw new Error("a stat failed");
  const out: Record<string, number[]> = Object.fromEntries(paths.map((p) => [p, []]));
  for (const line of text.trim().split("\n")) {
    const [p, us] = line.split(" ");
    out[p]?.push(Number(us));
  }
  return out;
}

function stats(us: number[]) {
  const s = [...us].sort((a, b) => a - b);
  const q = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))] / 1000;
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s[s.length - 1] / 1000 };
}

const tree = await makeTree();
let d: Daemon | null = null;
try {
  // The flood agent: one delta frame per line, then its message.
  const flood = `${tree.dir}/flood.sh`;
  Deno.writeTextFileSync(
    flood,
    `#!/bin/bash\nread -r _\nfor ((i = 0; i < ${DELTAS}; i++)); do printf '{"type":"delta","text":"w%d "}\\n' $i; done\n` +
      `printf '{"type":"message","role":"assistant","content":"flooded"}\\n'\n`,
  );
  createAgent(tree.root, "flood", { uid: 0, gid: 0, exec: flood });
  d = await startDaemon(tree);
  const home = `${tree.mount}/home/0/bench.txt`;
  Deno.writeTextFileSync(home, "x\n");
  // The reference in the same loop: a file on tmpfs, off the mount. Its latency under load is what
  // the machine itself adds (a 2-core VM: the flood and the tool calls' processes compete for
  // the CPU with the stat processes); the mount's own share is the ratio to it.
  const ref = `/dev/shm/cortexfs-load-${Deno.pid}`;
  Deno.writeTextFileSync(ref, "x\n");
  const paths: [string, string, string] = [`${tree.mount}/status`, home, ref];
  const ctx = (args: string[]) =>
    new Deno.Command(DENO, {
      args: ["run", "-A", "--quiet", CTX, ...args],
      cwd: tree.dir,
      env: { CTX_ROOT: tree.mount },
      stdout: "null",
      stderr: "null",
    }).output();
  const idle = await sample(paths, `${tree.dir}/stop-idle`, async () => {
    for (let i = 0; i < 400; i++) await new Promise((r) => setTimeout(r, 5));
  });
  let floodMs = 0;
  const load = await sample(paths, `${tree.dir}/stop-load`, async () => {
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
  const r = stats(load[ref]);
  for (const p of paths) {
    const i = stats(idle[p]), l = stats(load[p]);
    const name = p === ref ? "tmpfs (ref)" : p.slice(tree.mount.length + 1);
    const f = (v: number) => v.toFixed(2).padStart(7);
    console.log(
      `${name.padEnd(16)} idle n=${i.n} p50 ${f(i.p50)} p99 ${f(i.p99)} max ${f(i.max)} ms | ` +
        `load n=${l.n} p50 ${f(l.p50)} p99 ${f(l.p99)} max ${f(l.max)} ms | p99 ${
          (l.p99 / i.p99).toFixed(2)
        }x idle, ${(l.p99 / r.p99).toFixed(2)}x ref under load`,
    );
  }
  Deno.removeSync(ref);
} finally {
  await cleanup(tree, d);
}
