/**
 * Terminal benchmarks against references measured in the same run:
 * - throughput: `cat` of a 100 MB file inside ctxterm (recorded, drained by one watcher) vs the same
 *   `cat` inside `script -q` (the util-linux PTY recorder), as a ratio; also ctxterm unrecorded;
 * - watcher lag: an attacher types a line, the shell echoes it; how long until each watcher sees
 *   it, with 1 watcher and with 3.
 * Prints numbers and ratios; never asserts a duration. BENCH_MB and BENCH_PINGS scale it.
 */
import { FRAME } from "../../src/abi/terminal.ts";
import { RawClient, startTerm, stopTerm } from "../../tests/fixture/mod.ts";

const MB = Number(Deno.env.get("BENCH_MB") ?? 100);
const PINGS = Number(Deno.env.get("BENCH_PINGS") ?? 40);

const dir = await Deno.makeTempDir({ prefix: "ctx-bench-term-" });
const file = `${dir}/big.txt`;
{
  // Printable lines (a terminal's usual diet), 100 bytes each.
  const line =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-the-quick-brown-fox-jumps-over-it\n";
  const chunk = new TextEncoder().encode(line.repeat(10486));
  const f = Deno.openSync(file, { write: true, create: true, truncate: true });
  let left = MB * 1024 * 1024;
  while (left > 0) {
    const part = chunk.subarray(0, Math.min(chunk.length, left));
    f.writeSync(part);
    left -= part.length;
  }
  f.close();
}

function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.95))];
}

async function scriptCat(): Promise<number> {
  const t = performance.now();
  const o = await new Deno.Command("script", {
    args: ["-q", "-e", "-c", `cat ${file}`, "/dev/null"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).output();
  if (o.code !== 0) throw new Error(`script exited ${o.code}`);
  return performance.now() - t;
}

async function ctxtermCat(record: boolean): Promise<number> {
  const t = await startTerm(["/bin/sh", "-c", `read go; cat ${file}`], { record });
  try {
    const w = await RawClient.open(t.socket, "watch");
    w.keepOutput = false;
    const a = await RawClient.open(t.socket, "attach");
    a.keepOutput = false;
    while (w.of(FRAME.snapshot).length === 0 || a.of(FRAME.snapshot).length === 0) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const start = performance.now();
    await a.input("\r");
    while (w.of(FRAME.exit).length === 0 && !w.closed) await new Promise((r) => setTimeout(r, 2));
    const ms = performance.now() - start;
    if (w.received < MB * 1024 * 1024) throw new Error(`watcher got only ${w.received} bytes`);
    a.close();
    w.close();
    return ms;
  } finally {
    await stopTerm(t);
  }
}

const rate = (ms: number) => `${(MB / (ms / 1000)).toFixed(1)} MB/s`;
const script = await scriptCat();
const recorded = await ctxtermCat(true);
const plain = await ctxtermCat(false);
const script2 = await scriptCat();
const ref = Math.min(script, script2);
console.log(`throughput, cat of ${MB} MB (one run each; script twice, the faster kept):`);
console.log(`  script -q                         ${ref.toFixed(0)} ms  ${rate(ref)}`);
console.log(
  `  ctxterm, recorded, 1 watcher      ${recorded.toFixed(0)} ms  ${rate(recorded)}  ratio ${
    (recorded / ref).toFixed(2)
  }x script`,
);
console.log(
  `  ctxterm, not recorded, 1 watcher  ${plain.toFixed(0)} ms  ${rate(plain)}  ratio ${
    (plain / ref).toFixed(2)
  }x script`,
);

async function lag(watchers: number): Promise<number[]> {
  const t = await startTerm(["/bin/sh", "-c", 'while read l; do echo "pong $l"; done']);
  try {
    const ws: RawClient[] = [];
    const seen: Map<number, number>[] = [];
    for (let i = 0; i < watchers; i++) {
      const w = await RawClient.open(t.socket, "watch");
      w.keepOutput = false;
      const m = new Map<number, number>();
      w.onOutput = (text) => {
        for (const x of text.matchAll(/pong (\d+)/g)) m.set(Number(x[1]), performance.now());
      };
      ws.push(w);
      seen.push(m);
    }
    const a = await RawClient.open(t.socket, "attach");
    a.keepOutput = false;
    while (ws.some((w) => w.of(FRAME.snapshot).length === 0)) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const lags: number[] = [];
    for (let n = 0; n < PINGS; n++) {
      const sent = performance.now();
      await a.input(`${n}\r`);
      while (seen.some((m) => !m.has(n))) await new Promise((r) => setTimeout(r, 0));
      for (const m of seen) lags.push((m.get(n) ?? sent) - sent);
    }
    a.close();
    for (const w of ws) w.close();
    return lags;
  } finally {
    await stopTerm(t);
  }
}

console.log(
  `watcher lag: an attacher's line echoed by the shell, until each watcher sees it (${PINGS} lines):`,
);
for (const n of [1, 3]) {
  const xs = await lag(n);
  console.log(
    `  ${n} watcher${n > 1 ? "s" : " "}  median ${mid(xs).toFixed(2)} ms  p95 ${
      p95(xs).toFixed(2)
    } ms`,
  );
}
await Deno.remove(dir, { recursive: true });
