/**
 * Host overhead per model turn: a `send` to a model-backed agent (openai-chat against a local
 * server answering at once with a recorded stream) vs a bare `fetch` of that same stream, and the
 * driver alone (AI SDK, no runtime) in between. Interleaved, medians, ratios. Never asserts a
 * duration.
 */
import { openaiChatDriver } from "../../src/model/openai.ts";
import { cleanup, makeTree, Raw } from "../../tests/fixture/mod.ts";
import { startRuntimeDaemon } from "../../tests/fixture/runtime.ts";
import { fixture, OpenAIServer } from "../../tests/model/openai_server.ts";
import { addModel } from "../../tests/model/world.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 30);

function mid(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const server = new OpenAIServer();
const f = await makeTree();
addModel(f, "fixture/chat", { baseURL: server.baseURL, id: "fixture-model", limit: 131072 });
createAgent(f.root, "m", { uid: 0, gid: 0, model: "fixture/chat" });
const ws = `${f.dir}/ws`;
Deno.mkdirSync(ws);
Deno.chdir(ws); // the socket client's cwd is the workspace the runtime holds
// The production path: cortexfsd, its host and the agent's own instance.
const rt = await startRuntimeDaemon(f);
const c = await Raw.connect(`${f.root}/agent/m.sock`);
const plain = fixture("plain");
const body = JSON.stringify({
  model: "fixture-model",
  stream: true,
  messages: [{ role: "user", content: "bench" }],
});
try {
  let k = 0;
  const raw = async () => {
    server.push(plain);
    const r = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await r.text();
  };
  const driver = async () => {
    server.push(plain);
    const config = {
      ref: "fixture/chat",
      provider: "fixture",
      id: "fixture-model",
      defaults: { base_url: server.baseURL },
    };
    const signal = new AbortController().signal;
    for await (
      const _ of openaiChatDriver.stream({
        model: "fixture/chat",
        config,
        messages: [{ role: "user", content: "bench" }],
        signal,
      })
    ) { /* drain */ }
  };
  const send = async () => {
    server.push(plain);
    const from = c.frames.length;
    c.write({ op: "send", id: `b-${k++}`, session: "bench", input: "bench" });
    const fs = await c.run(from);
    if (fs.at(-1)?.status !== "ok") throw new Error(JSON.stringify(fs));
  };
  const fns = [raw, driver, send];
  for (const fn of fns) await fn(); // warm-up (the SDK import, the session)
  const xs: number[][] = fns.map(() => []);
  for (let i = 0; i < N; i++) {
    for (const [j, fn] of fns.entries()) {
      const t = performance.now();
      await fn();
      xs[j].push(performance.now() - t);
    }
  }
  const [tRaw, tDriver, tSend] = xs.map(mid);
  const row = (name: string, ms: number) =>
    console.log(
      `${name.padEnd(40)} ${ms.toFixed(2).padStart(8)} ms  ${
        (ms / tRaw).toFixed(2).padStart(6)
      }x raw fetch`,
    );
  console.log(
    `model turn round trips (median of ${N}, interleaved; history grows to ${N + 1} turns)`,
  );
  row("raw fetch of the SSE stream", tRaw);
  row("openai-chat driver alone (AI SDK)", tDriver);
  row("send -> model-backed run (1 turn)", tSend);
  console.log(
    `host overhead per model turn: ${(tSend - tRaw).toFixed(2)} ms over a raw fetch ` +
      `(${(tSend - tDriver).toFixed(2)} ms of it outside the driver)`,
  );
} finally {
  c.close();
  await rt.stop();
  await server.close();
  await cleanup(f);
}
