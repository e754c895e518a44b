/**
 * Runtime round trips against references measured in the same run: a `send` to an executable echo
 * agent vs spawning that same agent directly with the same envelope (interleaved, same history
 * size), a `tsh` op vs a bare spawn.
 * Prints medians and the ratios (the per-step host overhead). Never asserts a duration.
 */
import { historyOf } from "../../src/runtime/turn.ts";
import { sessionRef } from "../../src/store/session/ref.ts";
import { addTestAgent, cleanup, makeTree, Raw } from "../../tests/fixture/mod.ts";
import { startRuntimeDaemon } from "../../tests/fixture/runtime.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 30);
/** Deltas of the flood case. */
const FLOOD = Number(Deno.env.get("BENCH_FLOOD") ?? 3000);

function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function median(fn: () => Promise<void>, n = N): Promise<number> {
  await fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  return mid(xs);
}

/** Interleaves `a` and `b` (same machine state for both), returning each one's median; `between` is not timed. */
async function paired(
  a: () => Promise<void>,
  b: () => Promise<void>,
  between: () => void,
): Promise<[number, number]> {
  between();
  await a();
  await b();
  const xa: number[] = [], xb: number[] = [];
  for (let i = 0; i < N; i++) {
    between();
    let t = performance.now();
    await a();
    xa.push(performance.now() - t);
    t = performance.now();
    await b();
    xb.push(performance.now() - t);
  }
  return [mid(xa), mid(xb)];
}

const f = await makeTree();
addTestAgent(f, "echo");
// The production path: cortexfsd, its host and the agent's own instance.
const rt = await startRuntimeDaemon(f);
const c = await Raw.connect(`${f.root}/agent/echo.sock`);
try {
  let k = 0;
  const roundTrip = async (frame: Record<string, unknown>) => {
    const from = c.frames.length;
    c.write({ ...frame, id: `b-${k++}` });
    await c.run(from);
  };
  // The direct reference gets the very envelope a send would build now (same history size), so
  // the difference is the host's own work, not the agent reading a longer line.
  const ref = sessionRef({
    root: f.root,
    run: f.run,
    agent: "echo",
    session: "bench",
    scope: "private",
    uid: 0,
    gid: 0,
  });
  let input = "echo bench";
  const envelope = () =>
    new TextEncoder().encode(
      JSON.stringify({
        schema: "cortexfs.agent-invocation/v1",
        run: "ctx-00000000000000000000000000000000",
        step: 0,
        input,
        history_messages: JSON.stringify(historyOf(ref, "none", 60 * 1024)),
        tool_context: "",
        observation: null,
      }) + "\n",
    );
  let bytes = envelope();
  const direct = async () => {
    const p = new Deno.Command(`${f.root}/agent/echo`, {
      clearEnv: true,
      env: { LOG_DIR: f.logs, CTX_RUN_ID: "direct", CTX_AGENT_STEP: "0" },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const w = p.stdin.getWriter();
    await w.write(bytes);
    await w.close();
    await p.output();
  };
  const bare = async () => {
    await new Deno.Command("/bin/true", { stdout: "null", stderr: "null" }).output();
  };
  const tBare = await median(bare);
  const [tDirect, tSend] = await paired(
    direct,
    () => roundTrip({ op: "send", session: "bench", input: "echo bench" }),
    () => bytes = envelope(),
  );
  const tTsh = await median(() => roundTrip({ op: "tsh", session: "bench", args: ["tools"] }), 10);
  // A delta flood: the agent prints one delta per word; each must be durable before a client
  // sees it (group commit shares the fsyncs).
  const words = Array.from({ length: FLOOD }, (_, i) => `w${i}`).join(" ");
  input = `echo ${words}`;
  const [tFloodDirect, tFlood] = await paired(
    direct,
    () => roundTrip({ op: "send", session: "flood", input }),
    () => bytes = envelope(),
  );
  const row = (name: string, ms: number, ref: number, refName: string) =>
    console.log(
      `${name.padEnd(34)} ${ms.toFixed(2).padStart(8)} ms  ${
        (ms / ref).toFixed(2).padStart(6)
      }x ${refName}`,
    );
  console.log(`runtime round trips (median of ${N}; tsh of 10)`);
  row("bare spawn /bin/true", tBare, tBare, "bare spawn");
  row("direct agent spawn + envelope", tDirect, tBare, "bare spawn");
  row("send -> exec echo agent (1 step)", tSend, tDirect, "direct agent spawn");
  row("tsh op `tools` (sandboxed)", tTsh, tBare, "bare spawn");
  row(`direct agent, ${FLOOD} deltas`, tFloodDirect, tBare, "bare spawn");
  row(`send, ${FLOOD} deltas`, tFlood, tFloodDirect, `direct agent, ${FLOOD} deltas`);
  console.log(
    `per-step host overhead: ${(tSend - tDirect).toFixed(2)} ms (${
      (tSend / tDirect).toFixed(2)
    }x the agent's own spawn)`,
  );
} finally {
  c.close();
  await rt.stop();
  await cleanup(f);
}
