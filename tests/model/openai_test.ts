/** The `openai-chat` driver end to end: a real daemon, a local server speaking Chat Completions SSE, real ctx. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { modelEntry } from "../../src/store/tree.ts";
import { writeSecret } from "../../src/model/secret.ts";
import {
  cleanup,
  ctx,
  ctxRun,
  history,
  makeTree,
  Raw,
  type RuntimeDaemon,
  startRuntimeDaemon,
  type Tree,
  workspace,
} from "../fixture/mod.ts";
import { fixture, OpenAIServer, type Reply } from "./openai_server.ts";

/** A real server, when one is reachable: the live cases below run against it. */
const LIVE = Deno.env.get("CTX_TEST_OPENAI_BASE_URL");
const LIVE_MODEL = Deno.env.get("CTX_TEST_OPENAI_MODEL") ?? "gpt-4o-mini";
const LIVE_KEY = Deno.env.get("CTX_TEST_OPENAI_API_KEY");
const KEY = "sk-fixture-0123456789abcdef";

interface World {
  f: Tree;
  d: RuntimeDaemon;
  ws: string;
  secrets: string;
}

/** Writes `model/<ref>` (+ `.d/`) on the openai-chat driver; then the agent `m` on it. */
function addModel(f: Tree, ref: string, options: { baseURL: string; id: string }): void {
  const [p] = ref.split("/");
  Deno.mkdirSync(`${f.root}/model/${p}`, { recursive: true });
  Deno.mkdirSync(`${f.root}/model/${ref}.d`);
  const d = `${f.root}/model/${ref}.d`;
  replaceFile(`${d}/driver`, "agent=openai-chat\ndefault=openai-chat\n");
  replaceFile(`${d}/id`, `${options.id}\n`);
  replaceFile(`${d}/default`, `base_url=${options.baseURL}\n`);
  replaceFile(`${d}/limit`, "131072\n");
  replaceFile(`${f.root}/model/${ref}`, modelEntry(ref, { limit: 131072, now: 0 }), {
    mode: 0o555,
  });
  createAgent(f.root, "m", { uid: 0, gid: 0, model: ref });
}

async function world(
  baseURL: string,
  options: { id?: string; key?: string | null; tools?: string[] } = {},
): Promise<World> {
  const f = await makeTree();
  const secrets = `${f.dir}/secrets`;
  addModel(f, "fixture/chat", { baseURL, id: options.id ?? "fixture-model" });
  if (options.tools) {
    replaceFile(`${f.root}/agent/m.d/tools`, options.tools.map((t) => `${t}\n`).join(""));
  }
  if (options.key !== null) {
    writeSecret("fixture", "default", { key: options.key ?? KEY, root: secrets });
  }
  const ws = await workspace(f, {
    "hello.txt": "hello from the workspace\n",
    "second.txt": "the second file\n",
  });
  const d = await startRuntimeDaemon(f, { env: { CORTEXFS_SECRETS: secrets } });
  return { f, d, ws, secrets };
}

async function end(w: World, server?: OpenAIServer): Promise<void> {
  await w.d.stop();
  await server?.close();
  await cleanup(w.f);
}

function send(w: World, input: string) {
  return ctx(w.f, ["agent", "send", "m", input], { cwd: w.ws });
}

const types = (events: Record<string, unknown>[]) => events.map((e) => e.type);

/** A Chat Completions reply with one complete tool call in a single delta (recorded shape). */
function oneCall(id: string, args: unknown): Reply {
  const base = fixture("tool_call");
  const [first] = base.chunks as Record<string, unknown>[];
  const call = {
    ...first,
    choices: [{
      index: 0,
      delta: {
        role: "assistant",
        content: null,
        tool_calls: [{
          index: 0,
          id,
          type: "function",
          function: { name: "tsh", arguments: JSON.stringify(args) },
        }],
      },
      logprobs: null,
      finish_reason: null,
    }],
  };
  return { ...base, chunks: [call, ...(base.chunks ?? []).slice(-2)] };
}

Deno.test("openai-chat: a plain answer streams deltas, then usage and the final message; the key goes only into the request header", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"));
  const w = await world(server.baseURL);
  try {
    const out = await send(w, "say hello");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(types(events), ["start", "delta", "delta", "usage", "message", "done"]);
    assertEquals(events.find((e) => e.type === "usage"), {
      type: "usage",
      run: events[0].id,
      input_tokens: 21,
      output_tokens: 3,
      stop: "stop",
    });
    assertEquals(messages.at(-1)?.content, [{ type: "text", text: "Hello, world." }]);
    assertEquals(server.requests.length, 1);
    const [r] = server.requests;
    assertEquals(r.path, "/v1/chat/completions");
    assertEquals(r.authorization, `Bearer ${KEY}`);
    assertEquals([r.body.model, r.body.stream, r.body.stream_options], ["fixture-model", true, {
      include_usage: true,
    }]);
    assertEquals(r.body.messages?.map((m) => m.role), ["system", "user"]);
    assertEquals(r.body.messages?.[1].content, "say hello");
    assertEquals(r.body.tools?.map((t) => t.function.name), ["tsh"]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: one tool call (tsh fs.read hello.txt) runs through tsh and its result reaches the second request", async () => {
  const server = new OpenAIServer();
  server.push(fixture("tool_call"), fixture("after_tool"));
  const w = await world(server.baseURL);
  try {
    const out = await send(w, "read hello.txt");
    assertEquals(out.code, 0, out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(types(events), [
      "start",
      "usage",
      "tool_call",
      "message",
      "delta",
      "usage",
      "message",
      "done",
    ]);
    const call = events.find((e) => e.type === "tool_call");
    assertEquals(call, {
      type: "tool_call",
      run: events[0].id,
      id: "call_fx_read",
      name: "tsh",
      arguments: { args: ["fs.read", "hello.txt"] },
    });
    assertEquals(messages.map((m) => m.role), ["user", "tool", "assistant"]);
    const second = server.requests[1].body.messages ?? [];
    assertEquals(second.map((m) => m.role), ["system", "user", "assistant", "tool"]);
    assertEquals(second[3].tool_call_id, "call_fx_read");
    assertEquals(second[3].content, "hello from the workspace\n");
    assertEquals(
      (second[2].tool_calls as { id: string; function: { name: string; arguments: string } }[])
        .map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
      [["call_fx_read", "tsh", { args: ["fs.read", "hello.txt"] }]],
    );
    assertEquals(out.stdout.includes("The file greets the workspace."), true);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: .d/tools declarations are offered with their schema; a later run sends earlier user and assistant turns but no tool messages", async () => {
  const server = new OpenAIServer();
  server.push(fixture("tool_call"), fixture("after_tool"), fixture("plain"));
  const w = await world(server.baseURL, { tools: ["fs.read"] });
  try {
    assertEquals((await send(w, "read hello.txt")).code, 0);
    assertEquals((await send(w, "and now?")).code, 0);
    const tools = server.requests[0].body.tools as unknown as {
      function: { name: string; parameters: { required?: string[] } };
    }[];
    assertEquals(tools.map((t) => t.function.name), ["tsh", "fs_read"]);
    assertEquals(tools[1].function.parameters.required, ["path"]);
    const third = server.requests[2].body.messages ?? [];
    assertEquals(third.map((m) => [m.role, m.content]), [
      ["system", third[0].content],
      ["user", "read hello.txt"],
      ["assistant", "The file greets the workspace."],
      ["user", "and now?"],
    ]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: two tool calls in one turn run in order and both results go back in one request", async () => {
  const server = new OpenAIServer();
  server.push(fixture("parallel"), fixture("after_tool"));
  const w = await world(server.baseURL);
  try {
    assertEquals((await send(w, "read both")).code, 0);
    const { events } = history(w.f, "m");
    assertEquals(
      events.filter((e) => e.type === "tool_call").map((e) => [e.id, e.arguments]),
      [
        ["call_fx_a", { args: ["fs.read", "hello.txt"] }],
        ["call_fx_b", { args: ["fs.read", "second.txt"] }],
      ],
    );
    const second = server.requests[1].body.messages ?? [];
    assertEquals(
      second.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]),
      [["call_fx_a", "hello from the workspace\n"], ["call_fx_b", "the second file\n"]],
    );
    assertEquals(types(events).at(-1), "done");
    assertEquals(events.at(-1)?.status, "ok");
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: quirky chunking (id/name first, arguments spread over chunks with empty id and name) makes one call", async () => {
  const server = new OpenAIServer();
  server.push(fixture("quirky"), fixture("after_tool"));
  const w = await world(server.baseURL);
  try {
    assertEquals((await send(w, "look")).code, 0);
    const { events } = history(w.f, "m");
    assertEquals(
      events.filter((e) => e.type === "tool_call").map((e) => [e.id, e.name, e.arguments]),
      [["call_fx_q", "tsh", { args: ["fs.read", "hello.txt"] }]],
    );
    assertEquals(events.find((e) => e.type === "delta")?.text, "Let me look.");
    assertEquals(events.at(-1)?.status, "ok");
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: a late name (first tool call chunk without function.name) still makes one call", async () => {
  const server = new OpenAIServer();
  server.push(fixture("late_name"), fixture("after_tool"));
  const w = await world(server.baseURL);
  try {
    assertEquals((await send(w, "look")).code, 0);
    const { events } = history(w.f, "m");
    assertEquals(
      events.filter((e) => e.type === "tool_call").map((e) => [e.id, e.name, e.arguments]),
      [["call_fx_late", "tsh", { args: ["fs.read", "hello.txt"] }]],
    );
    assertEquals(events.at(-1)?.status, "ok");
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: a 429 is retried (Retry-After honoured) and the second try answers", async () => {
  const server = new OpenAIServer();
  server.push(fixture("rate_limited"), fixture("plain"));
  const w = await world(server.baseURL);
  try {
    const out = await send(w, "hello");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    assertEquals(server.requests.length, 2);
    assertEquals(types(history(w.f, "m").events), [
      "start",
      "delta",
      "delta",
      "usage",
      "message",
      "done",
    ]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: 5xx is retried with backoff and ends EIO after 4 tries; 429 every time ends EAGAIN", async () => {
  const server = new OpenAIServer();
  const busy = fixture("server_error");
  const limited = fixture("rate_limited");
  server.push(busy, busy, busy, busy, limited, limited, limited, limited);
  const w = await world(server.baseURL);
  try {
    const t0 = Date.now();
    assertEquals((await send(w, "one")).code !== 0, true);
    // 200 + 400 + 800 ms of backoff between the four tries.
    assertEquals(Date.now() - t0 >= 1400, true);
    assertEquals(server.requests.length, 4);
    assertEquals((await send(w, "two")).code !== 0, true);
    assertEquals(server.requests.length, 8);
    const errors = history(w.f, "m").events.filter((e) => e.type === "error").map((e) => e.code);
    assertEquals(errors, ["EIO", "EAGAIN"]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: a 401 is EACCES at once (no retry); without a stored key no Authorization is sent", async () => {
  const server = new OpenAIServer();
  server.push(fixture("unauthorized"));
  // The daemon's own environment has OPENAI_API_KEY (helpers DAEMON_SECRETS): it is never used.
  const w = await world(server.baseURL, { key: null });
  try {
    const out = await send(w, "hello");
    assertEquals(out.code !== 0, true);
    const { events } = history(w.f, "m");
    assertEquals(types(events), ["start", "error", "done"]);
    assertEquals(events[1].code, "EACCES");
    assertEquals(events[2].status, "error");
    assertEquals(server.requests.length, 1);
    assertEquals(server.requests[0].authorization, null);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: a provider nobody listens at is ECONNREFUSED naming the model and the URL it was sent to", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close(); // nothing listens there now
  const url = `http://127.0.0.1:${port}/v1`;
  const w = await world(url);
  try {
    const out = await send(w, "hello");
    assert(out.code !== 0, out.stdout);
    const error = history(w.f, "m").events.find((e) => e.type === "error");
    assertEquals(error?.code, "ECONNREFUSED");
    const message = String(error?.message);
    assert(message.includes("fixture/chat") && message.includes(url), message);
    assert(out.stderr.includes(url), out.stderr);
  } finally {
    await end(w);
  }
});

Deno.test("openai-chat: cancel mid-stream aborts the HTTP stream (the server sees the connection close) and the run ends cancelled", async () => {
  const server = new OpenAIServer();
  server.push(fixture("stall"));
  const w = await world(server.baseURL);
  const c = await Raw.connect(`${w.f.root}/agent/m.sock`);
  try {
    c.write({ op: "send", id: "s-1", session: "default", input: "think" });
    const fs = await c.until((fs) => fs.some((f) => f.type === "delta"));
    const run = String(fs[0].run);
    c.write({ op: "cancel", id: run });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const closed = await Promise.race([
      server.closed.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 15_000))),
    ]);
    clearTimeout(timer);
    assertEquals(closed, true, "the driver must close the HTTP connection");
    const done = (await c.until((fs) => fs.some((f) => f.type === "done"))).find((f) =>
      f.type === "done"
    );
    assertEquals(done?.status, "cancelled");
  } finally {
    c.close();
    await end(w, server);
  }
});

/** Every file under `dir` (symlinks not followed) whose bytes contain `needle`. */
function filesWith(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const want = new TextEncoder().encode(needle);
  const walk = (d: string) => {
    for (const e of Deno.readDirSync(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) walk(p);
      else if (e.isFile) {
        const bytes = Deno.readFileSync(p);
        outer: for (let i = 0; i + want.length <= bytes.length; i++) {
          for (let j = 0; j < want.length; j++) if (bytes[i + j] !== want[j]) continue outer;
          hits.push(p);
          break;
        }
      }
    }
  };
  walk(dir);
  return hits;
}

Deno.test("openai-chat: a key planted with `ctx provider set` is used in the request header and appears in no file of the tree, the run dir, the workspace or a tool sandbox's environment and files", async () => {
  const planted = "sk-planted-7f3a9c41d2e8b6a5";
  const server = new OpenAIServer();
  // The grep pattern is split so the command itself never contains the key.
  const probe = "for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e; done; env; " +
    `grep -rIl -e 'sk-plan''ted-7f3a' /workspace /home /ctx /tmp /run /etc 2>/dev/null | ` +
    "sed 's/^/FOUND:/'; echo probed";
  server.push(oneCall("call_env", { args: ["bash", probe] }), fixture("after_tool"));
  const w = await world(server.baseURL, { key: null });
  try {
    const set = await ctxRun(["provider", "set", "fixture"], {
      env: { CORTEXFS_SECRETS: w.secrets },
      stdin: `${planted}\n`,
    });
    assertEquals([set.code, set.stderr], [0, ""]);
    assertEquals(set.stdout.includes(planted), false);
    const file = `${w.secrets}/provider/fixture/default`;
    const st = Deno.statSync(file);
    assertEquals([(st.mode ?? 0) & 0o777, st.uid], [0o600, Deno.uid()]);
    const out = await send(w, "probe");
    assertEquals(out.code, 0, out.stderr);
    assertEquals(server.requests[0].authorization, `Bearer ${planted}`);
    const { events } = history(w.f, "m");
    const result = events.find((e) => e.type === "message" && e.role === "tool") as {
      content: { content: string; status: string }[];
    };
    assertEquals(result.content[0].status, "ok", JSON.stringify(result));
    const text = result.content[0].content;
    assert(text.includes("probed"), text);
    assert(text.includes("CTX_AGENT=m"), "the probe saw the sandbox environment");
    assertEquals(text.split("\n").filter((l) => l.startsWith("FOUND:")), []);
    assertEquals(text.includes(planted), false);
    assertEquals(out.stdout.includes(planted) || out.stderr.includes(planted), false);
    for (const dir of [w.f.root, w.f.run, w.ws]) assertEquals(filesWith(dir, planted), [], dir);
  } finally {
    await end(w, server);
  }
});

Deno.test({
  name: "openai-chat live (CTX_TEST_OPENAI_BASE_URL): a plain answer",
  ignore: !LIVE,
  async fn() {
    const w = await world(LIVE ?? "", { id: LIVE_MODEL, key: LIVE_KEY ?? null });
    try {
      const out = await send(w, "Reply with the single word: pong");
      assertEquals(out.code, 0, out.stderr);
      const { events } = history(w.f, "m");
      assertEquals(events.at(-1)?.status, "ok");
      assert(events.some((e) => e.type === "usage"));
    } finally {
      await end(w);
    }
  },
});

Deno.test({
  name: "openai-chat live (CTX_TEST_OPENAI_BASE_URL): one tool call reads hello.txt",
  ignore: !LIVE,
  async fn() {
    const w = await world(LIVE ?? "", { id: LIVE_MODEL, key: LIVE_KEY ?? null });
    try {
      const out = await send(
        w,
        'Call the tsh tool with {"args":["fs.read","hello.txt"]}, then repeat the file content.',
      );
      assertEquals(out.code, 0, out.stderr);
      const { events } = history(w.f, "m");
      assert(events.some((e) => e.type === "tool_call"), JSON.stringify(events));
      assert(out.stdout.includes("hello from the workspace"), out.stdout);
    } finally {
      await end(w);
    }
  },
});

Deno.test({
  name: "openai-chat live (CTX_TEST_OPENAI_BASE_URL): cancel mid-stream ends the run cancelled",
  ignore: !LIVE,
  async fn() {
    const w = await world(LIVE ?? "", { id: LIVE_MODEL, key: LIVE_KEY ?? null });
    const c = await Raw.connect(`${w.f.root}/agent/m.sock`);
    try {
      c.write({ op: "send", id: "s-1", session: "default", input: "Count from 1 to 500." });
      const fs = await c.until((fs) => fs.some((f) => f.type === "delta" || f.type === "done"));
      c.write({ op: "cancel", id: String(fs[0].run) });
      const done = (await c.until((fs) => fs.some((f) => f.type === "done"))).find((f) =>
        f.type === "done"
      );
      assert(done?.status === "cancelled" || done?.status === "ok", JSON.stringify(done));
    } finally {
      c.close();
      await end(w);
    }
  },
});

Deno.test("openai-chat: a 401 that echoes the key escaped, URL-encoded, base64'd or cut leaves no form of it in the frames, ctx's output or any file", async () => {
  const key = 'sk-fix"ture/0123+4567\\89=abcdef';
  const forms = [
    key,
    JSON.stringify(key),
    encodeURIComponent(key),
    btoa(`Bearer ${key}`).slice(12, -4), // the part that encodes only key bytes
    key.slice(3, 15),
  ];
  const server = new OpenAIServer();
  server.push({
    status: 401,
    headers: { "content-type": "application/json" },
    body: {
      error: {
        message: `Incorrect API key provided: ${forms.slice(1).join(" ")}`,
        type: "invalid_request_error",
        code: "invalid_api_key",
      },
    },
  });
  const w = await world(server.baseURL, { key });
  try {
    const out = await send(w, "hello");
    assertEquals(out.code !== 0, true);
    assertEquals(server.requests[0].authorization, `Bearer ${key}`);
    const err = history(w.f, "m").events.find((e) => e.type === "error");
    assertEquals(err?.code, "EACCES");
    assert(String(err?.message).includes("<redacted>"), String(err?.message));
    for (const form of forms) {
      for (const text of [String(err?.message), out.stdout, out.stderr]) {
        assertEquals(text.includes(form), false, `${text} holds ${form}`);
      }
      for (const dir of [w.f.root, w.f.run, w.ws]) assertEquals(filesWith(dir, form), [], dir);
    }
  } finally {
    await end(w, server);
  }
});

/** The peak resident memory of process `pid` in MiB (VmHWM). */
function peakMiB(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmHWM:\s+(\d+) kB/m);
  return Number(m?.[1] ?? 0) / 1024;
}

/** 64 MiB streamed as 1024 chunks of 64 KiB: 16 turns' bound, and more than the sockets buffer. */
const FLOOD = 1024;
const BIG = "x".repeat(64 * 1024);

/** A Chat Completions chunk (the recorded shape of `plain`) whose delta is `delta`. */
function chunkOf(delta: Record<string, unknown>): Record<string, unknown> {
  const [first] = fixture("plain").chunks as Record<string, unknown>[];
  return { ...first, choices: [{ index: 0, delta, logprobs: null, finish_reason: null }] };
}

for (
  const [what, head, delta] of [
    ["text", chunkOf({ role: "assistant", content: "" }), { content: BIG }],
    [
      "tool-call arguments",
      chunkOf({
        role: "assistant",
        content: null,
        tool_calls: [{
          index: 0,
          id: "call_big",
          type: "function",
          function: { name: "tsh", arguments: '{"args":["echo","' },
        }],
      }),
      { tool_calls: [{ index: 0, function: { arguments: BIG } }] },
    ],
  ] as const
) {
  Deno.test(`openai-chat: a turn streaming ${what} past the bound ends the run E2BIG, the stream cancelled, nothing recorded as the answer, memory small`, async () => {
    const server = new OpenAIServer();
    server.push({ status: 200, chunks: [head], repeat: { chunk: chunkOf(delta), times: FLOOD } });
    const w = await world(server.baseURL);
    try {
      const out = await send(w, "flood");
      assertEquals(out.code !== 0, true);
      // Either the client cancelled the stream or it read it all: whichever comes first.
      const how = await Promise.race([
        server.closed.then(() => "cancelled"),
        server.ended.then(() => "read to the end"),
      ]);
      assertEquals(how, "cancelled");
      assert(server.repeated < FLOOD, `${server.repeated} chunks sent`);
      const { events, messages } = history(w.f, "m");
      const err = events.find((e) => e.type === "error");
      assertEquals([err?.code, events.at(-1)?.status], ["E2BIG", "error"]);
      // The turn is not half-recorded: only the user message is.
      assertEquals(messages.map((m) => m.role), ["user"]);
      const peak = peakMiB(w.d.instancePid("m")!); // the process that ran the turn
      // ~110 MiB measured with the bound; the flood alone is 64 MiB of text, twice that as UTF-16.
      assert(peak < 256, `the daemon peaked at ${peak} MiB`);
    } finally {
      await end(w, server);
    }
  });
}
