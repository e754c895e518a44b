/**
 * Mount latency while the daemon's main thread is busy: another process stats `<mount>/status` in
 * a loop while this thread spins for 2 s, with the mount served by its own worker (cortexfsd's
 * way) and, for comparison, in-thread (the old way). Prints the stat latencies seen.
 * Run: tools/deno run -A bench/fuse/busy.ts [--busy-ms 2000]
 */
import { update } from "../../src/store/generation.ts";
import { startMount, startMountThread } from "../../src/fuse/mod.ts";

const busyMs = Number(Deno.args[Deno.args.indexOf("--busy-ms") + 1] || 2000) || 2000;

// Bash times each stat with $EPOCHREALTIME (no fork for the clock) and stops once the spin is
// over and a few more stats went through: one latency (us) per line.
const LOOP = `
m=$1; seen_end=0
echo ready
while :; do
  t0=\${EPOCHREALTIME/./}; stat -c %F "$m/status" >/dev/null || echo fail; t1=\${EPOCHREALTIME/./}
  echo $((t1 - t0))
  [ -e "$2" ] && seen_end=$((seen_end + 1))
  [ "$seen_end" -ge 20 ] && break
done
`;

async function measure(mode: "worker" | "in-thread"): Promise<number[]> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-busy-" });
  const storage = `${dir}/storage`, mount = `${dir}/mnt`, run = `${dir}/run`, end = `${dir}/end`;
  await Deno.mkdir(mount);
  await Deno.mkdir(run);
  update(storage, {});
  const root = Deno.realPathSync(`${storage}/current`);
  const options = { root, storage, generation: "1", mount, run, bins: {} };
  const handle = mode === "worker" ? await startMountThread(options) : startMount(options);
  try {
    const child = new Deno.Command("bash", {
      args: ["-c", LOOP, "busy", mount, end],
      stdout: "piped",
    }).spawn();
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!head.includes("ready\n")) head += (await lines.read()).value ?? "";
    // The spin: this thread does nothing else (no event loop turn) for busyMs.
    const t0 = performance.now();
    while (performance.now() - t0 < busyMs) { /* busy */ }
    Deno.writeTextFileSync(end, "");
    let text = head.slice(head.indexOf("ready\n") + 6);
    for (let r = await lines.read(); !r.done; r = await lines.read()) text += r.value;
    await child.status;
    if (text.includes("fail")) throw new Error(`a stat failed (${mode})`);
    return text.trim().split("\n").map(Number);
  } finally {
    await handle.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

for (const mode of ["worker", "in-thread"] as const) {
  const us = await measure(mode);
  const sorted = [...us].sort((a, b) => a - b);
  const ms = (v: number) => (v / 1000).toFixed(2);
  console.log(
    `${mode.padEnd(9)} busy ${busyMs} ms: ${us.length} stats, median ${
      ms(sorted[sorted.length >> 1])
    } ms, max ${ms(sorted[sorted.length - 1])} ms`,
  );
}
