/**
 * Runtime round trips against references measured in the same run: a `send` to an executable echo
 * agent vs spawning that same agent directly with the same envelope, a `tsh` op vs a bare spawn.
 * Prints medians and the ratios (the per-step host overhead). Never asserts a duration.
 */
import { startRuntime } from "../../src/runtime/mod.ts";
import { addTestAgent, cleanup, makeTree, Raw } from "../../tests/runtime/helpers.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 30);

async function median(fn: () => Promise<void>, n = N): Promise<number> {
  await fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  xs.sort((a, b) => a - b);
  return xs[Math.floor(xs.length / 2)];
}

const f = await makeTree();
addTestAgent(f, "echo");
const rt = await startRuntime({ root: f.root, run: f.run });
const c = await Raw.connect(`${f.root}/agent/echo.sock`);
try {
  let k = 0;
  const roundTrip = async (frame: Record<string, unknown>) => {
    const from = c.frames.length;
    c.write({ ...frame, id: `b-${k++}` });
    await c.run(from);
  };
  const envelope = new TextEncoder().encode(
    JSON.stringify({
      schema: "cortexfs.agent-invocation/v1",
      run: "ctx-00000000000000000000000000000000",
      step: 0,
      input: "echo bench",
      history_messages: "[]",
      tool_context: "",
      observation: null,
    }) + "\n",
  );
  const direct = async () => {
    const p = new Deno.Command(`${f.root}/agent/echo`, {
      clearEnv: true,
      env: { LOG_DIR: f.logs, CTX_RUN_ID: "direct", CTX_AGENT_STEP: "0" },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const w = p.stdin.getWriter();
    await w.write(envelope);
    await w.close();
    await p.output();
  };
  const bare = async () => {
    await new Deno.Command("/bin/true", { stdout: "null", stderr: "null" }).output();
  };
  const tBare = await median(bare);
  const tDirect = await median(direct);
  const tSend = await median(() =>
    roundTrip({ op: "send", session: "bench", input: "echo bench" })
  );
  const tTsh = await median(() => roundTrip({ op: "tsh", session: "bench", args: ["tools"] }), 10);
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
  console.log(
    `per-step host overhead: ${(tSend - tDirect).toFixed(2)} ms (${
      (tSend / tDirect).toFixed(2)
    }x the agent's own spawn)`,
  );
} finally {
  c.close();
  await rt.close();
  await cleanup(f);
}
