/** One conformance suite, run against every wire format: a real daemon, a local server speaking that provider's SSE. */
import { assert, assertEquals } from "../assert.ts";
import { history, Raw } from "../fixture/mod.ts";
import { fixture, OpenAIServer, type Reply } from "./openai_server.ts";
import { end, send, types, world } from "./world.ts";

const KEY = "sk-wire-fixture-0123456789";

/** One wire format under test. */
interface Wire {
  driver: string;
  /** Fixture directory. */
  dir: string;
  path: string;
  /** The auth header the server must see for KEY, and the one it must not see. */
  auth(s: OpenAIServer, n: number): { key: string | null; other: string | null };
  /** The 5xx this provider sends when busy. */
  busy: string;
  /** The request's message roles (system, user...) as the wire carries them. */
  roles(body: Record<string, unknown>): string[];
  /** Tool results in a request: [call id, content]. */
  results(body: Record<string, unknown>): [string, string][];
  /** Tool names offered. */
  tools(body: Record<string, unknown>): string[];
}

type Item = Record<string, unknown>;
const items = (v: unknown) => (Array.isArray(v) ? v as Item[] : []);
const text = (c: unknown) =>
  typeof c === "string" ? c : items(c).map((p) => String(p.text ?? p.content ?? "")).join("");

const WIRES: Record<string, Wire> = {
  "openai-responses": {
    driver: "openai-responses",
    dir: "responses",
    path: "/v1/responses",
    auth: (s, n) => ({ key: s.requests[n].authorization, other: s.requests[n].apiKey }),
    busy: "server_error",
    roles: (b) => items(b.input).filter((i) => i.role).map((i) => String(i.role)),
    results: (b) =>
      items(b.input).filter((i) => i.type === "function_call_output").map((
        i,
      ) => [String(i.call_id), text(i.output)]),
    tools: (b) => items(b.tools).map((t) => String(t.name)),
  },
  "anthropic-messages": {
    driver: "anthropic-messages",
    dir: "anthropic",
    path: "/v1/messages",
    auth: (s, n) => ({ key: s.requests[n].apiKey, other: s.requests[n].authorization }),
    busy: "overloaded",
    roles: (
      b,
    ) => [...(b.system ? ["system"] : []), ...items(b.messages).map((m) => String(m.role))],
    results: (b) =>
      items(b.messages).flatMap((m) => items(m.content)).filter((p) => p.type === "tool_result")
        .map((p) => [String(p.tool_use_id), text(p.content)]),
    tools: (b) => items(b.tools).map((t) => String(t.name)),
  },
};

for (const [name, wire] of Object.entries(WIRES)) {
  const fx = (n: string): Reply => fixture(n, wire.dir);
  const setup = async (o: { key?: string } = { key: KEY }) => {
    const server = new OpenAIServer({ path: wire.path });
    const w = await world(server, { driver: wire.driver, ...o });
    Deno.writeTextFileSync(`${w.ws}/second.txt`, "the second file\n");
    return { server, w };
  };

  Deno.test(`${name}: a plain answer streams deltas, usage, the final message; the key goes only in its header`, async () => {
    const { server, w } = await setup();
    server.push(fx("plain"));
    try {
      const out = await send(w, "say hello");
      assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
      const { events, messages } = history(w.f, "m");
      assertEquals(types(events), ["start", "delta", "delta", "usage", "message", "done"]);
      assertEquals(events[3], {
        type: "usage",
        run: events[0].id,
        input_tokens: 21,
        output_tokens: 3,
        stop: "stop",
      });
      assertEquals(messages.at(-1)?.content, [{ type: "text", text: "Hello, world." }]);
      const [r] = server.requests;
      assertEquals([r.path, r.body.model, r.body.stream], [wire.path, "fixture-model", true]);
      const auth = wire.auth(server, 0);
      assertEquals(auth, {
        key: wire.driver === "anthropic-messages" ? KEY : `Bearer ${KEY}`,
        other: null,
      });
      assertEquals(wire.roles(r.body), ["system", "user"]);
      assertEquals(wire.tools(r.body), ["tsh"]);
    } finally {
      await end(w, server);
    }
  });

  Deno.test(`${name}: one tool call runs through tsh and its result goes back in the next request`, async () => {
    const { server, w } = await setup();
    server.push(fx("tool_call"), fx("after_tool"));
    try {
      const out = await send(w, "read hello.txt");
      assertEquals(out.code, 0, out.stderr);
      const { events } = history(w.f, "m");
      assertEquals(events.filter((e) => e.type === "usage").map((e) => e.stop), [
        "tool_calls",
        "stop",
      ]);
      const call = events.find((e) => e.type === "tool_call");
      assertEquals([call?.name, call?.arguments], ["tsh", { args: ["fs.read", "hello.txt"] }]);
      const id = String(call?.id);
      assertEquals(wire.results(server.requests[1].body), [[id, "hello from the workspace\n"]]);
      assert(out.stdout.includes("The file greets the workspace."), out.stdout);
      assertEquals(events.at(-1)?.status, "ok");
    } finally {
      await end(w, server);
    }
  });

  Deno.test(`${name}: two tool calls in one turn run in order and both results go back together`, async () => {
    const { server, w } = await setup();
    server.push(fx("parallel"), fx("after_tool"));
    try {
      assertEquals((await send(w, "read both")).code, 0);
      const { events } = history(w.f, "m");
      const calls = events.filter((e) => e.type === "tool_call");
      assertEquals(calls.map((e) => e.arguments), [
        { args: ["fs.read", "hello.txt"] },
        { args: ["fs.read", "second.txt"] },
      ]);
      assertEquals(wire.results(server.requests[1].body), [
        [String(calls[0].id), "hello from the workspace\n"],
        [String(calls[1].id), "the second file\n"],
      ]);
    } finally {
      await end(w, server);
    }
  });

  Deno.test(`${name}: a 429 is retried (Retry-After 0) and the next try answers`, async () => {
    const { server, w } = await setup();
    server.push(fx("rate_limited"), fx("plain"));
    try {
      const out = await send(w, "hello");
      assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
      assertEquals(server.requests.length, 2);
    } finally {
      await end(w, server);
    }
  });

  Deno.test(`${name}: a busy server (5xx) ends EIO after four tries; a 401 is EACCES at once`, async () => {
    const { server, w } = await setup({});
    const busy = fx(wire.busy);
    server.push(busy, busy, busy, busy, fx("unauthorized"));
    try {
      assertEquals((await send(w, "one")).code !== 0, true);
      assertEquals(server.requests.length, 4);
      assertEquals((await send(w, "two")).code !== 0, true);
      assertEquals(server.requests.length, 5);
      const errors = history(w.f, "m").events.filter((e) => e.type === "error");
      assertEquals(errors.map((e) => e.code), ["EIO", "EACCES"]);
      // No key stored: no auth header at all (never an empty one, never an env var's).
      assertEquals(wire.auth(server, 4), { key: null, other: null });
    } finally {
      await end(w, server);
    }
  });

  Deno.test(`${name}: cancel mid-stream aborts the HTTP stream (the server sees it closed); the run ends cancelled`, async () => {
    const { server, w } = await setup();
    server.push(fx("stall"));
    const c = await Raw.connect(`${w.f.root}/agent/m.sock`);
    try {
      c.write({ op: "send", id: "s-1", session: "default", input: "think" });
      const fs = await c.until((fs) => fs.some((f) => f.type === "delta"));
      c.write({ op: "cancel", id: String(fs[0].run) });
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
}

Deno.test("openai-responses: response.failed before any output is retried as a server error, then EIO", async () => {
  const server = new OpenAIServer({ path: "/v1/responses" });
  const w = await world(server, { driver: "openai-responses" });
  const failed = fixture("failed", "responses");
  server.push(failed, failed, failed, failed);
  try {
    assertEquals((await send(w, "one")).code !== 0, true);
    const errors = history(w.f, "m").events.filter((e) => e.type === "error");
    assertEquals(errors.map((e) => e.code), ["EIO"]);
    assert(String(errors[0].message).includes("The model failed to generate a response."));
    assertEquals(server.requests.length, 4);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-responses: an error event (code server_error) before any output is retried; the next try answers", async () => {
  const server = new OpenAIServer({ path: "/v1/responses" });
  const w = await world(server, { driver: "openai-responses" });
  server.push(fixture("error_event", "responses"), fixture("plain", "responses"));
  try {
    const out = await send(w, "one");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    assertEquals(server.requests.length, 2);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-responses: a function call with empty arguments is a call with {}", async () => {
  const server = new OpenAIServer({ path: "/v1/responses" });
  const w = await world(server, { driver: "openai-responses" });
  server.push(fixture("empty_args", "responses"), fixture("after_tool", "responses"));
  try {
    assertEquals((await send(w, "x")).code, 0);
    const { events } = history(w.f, "m");
    assertEquals(events.find((e) => e.type === "tool_call")?.arguments, {});
    const result = events.find((e) => e.type === "message" && e.role === "tool") as {
      content: { errno?: string }[];
    };
    assertEquals(result.content[0].errno, "EINVAL"); // tsh needs args: a result, not the run's end
    assertEquals(events.at(-1)?.status, "ok");
  } finally {
    await end(w, server);
  }
});

Deno.test("anthropic-messages: an error event inside a 200 stream (overloaded_error) before any delta is retried like a 529; max_tokens ends the answer normally", async () => {
  const server = new OpenAIServer({ path: "/v1/messages" });
  const w = await world(server, { driver: "anthropic-messages" });
  server.push(fixture("overloaded_event", "anthropic"), fixture("max_tokens", "anthropic"));
  try {
    const out = await send(w, "one");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello"], out.stderr);
    assertEquals(server.requests.length, 2);
    const { events } = history(w.f, "m");
    assertEquals(types(events), ["start", "delta", "usage", "message", "done"]);
    assertEquals(events.findLast((e) => e.type === "usage")?.stop, "length");
  } finally {
    await end(w, server);
  }
});

Deno.test("anthropic-messages: an error event after a delta was shown is not retried: the delta once, then EIO", async () => {
  const server = new OpenAIServer({ path: "/v1/messages" });
  const w = await world(server, { driver: "anthropic-messages" });
  server.push(fixture("overloaded_after_delta", "anthropic")); // a retry: "no reply queued"
  try {
    assertEquals((await send(w, "one")).code !== 0, true);
    assertEquals(server.requests.length, 1);
    const { events } = history(w.f, "m");
    assertEquals(types(events), ["start", "delta", "error", "done"]);
    assertEquals(events[1].text, "Hello");
    assertEquals([events[2].code, events[2].message, events[3].status], [
      "EIO",
      "provider sent an error in its stream: overloaded_error: Overloaded",
      "error",
    ]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: an error chunk inside a 200 stream is retried before any delta (then answers, or EIO after 4 tries), never after one", async () => {
  const server = new OpenAIServer();
  const w = await world(server);
  const err = fixture("stream_error");
  server.push(err, fixture("plain"));
  try {
    const out = await send(w, "one");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    assertEquals(server.requests.length, 2);
    const first = history(w.f, "m").events.length;
    assertEquals(types(history(w.f, "m").events), [
      "start",
      "delta",
      "delta",
      "usage",
      "message",
      "done",
    ]);
    // after "Hello" was streamed: no second try, the delta is not repeated
    server.push(fixture("stream_error_after_delta")); // a retry would get "no reply queued"
    assertEquals((await send(w, "two")).code !== 0, true);
    assertEquals(server.requests.length, 3);
    const two = history(w.f, "m").events.slice(first);
    assertEquals(types(two), ["start", "delta", "error", "done"]);
    assertEquals(two[1].text, "Hello");
    const msg = "provider sent an error in its stream: server_error: The server had an error " +
      "while processing your request. Sorry about that!";
    assertEquals([two[2].code, two[2].message], ["EIO", msg]);
    // every try fails the same way: 4 tries, then EIO
    server.push(err, err, err, err);
    assertEquals((await send(w, "three")).code !== 0, true);
    assertEquals(server.requests.length, 7);
    const last = history(w.f, "m").events.findLast((e) => e.type === "error");
    assertEquals([last?.code, last?.message], ["EIO", msg]);
  } finally {
    await end(w, server);
  }
});

Deno.test("openai-chat: a model without base_url in its default uses its provider's providers.d base_url", async () => {
  const server = new OpenAIServer();
  const providers = await Deno.makeTempDir({ prefix: "ctx-providers-" });
  Deno.writeTextFileSync(
    `${providers}/fixture.json`,
    JSON.stringify({ base_url: server.baseURL }),
  );
  const w = await world(server, {
    env: { CORTEXFS_PROVIDERS: providers },
    prepare: (f) => Deno.removeSync(`${f.root}/model/fixture/chat.d/default`),
  });
  server.push(fixture("plain"));
  try {
    const out = await send(w, "one");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    assertEquals(server.requests.map((r) => r.path), ["/v1/chat/completions"]);
  } finally {
    await end(w, server);
    await Deno.remove(providers, { recursive: true });
  }
});

/** What each wire sends for a model's `effort` (and sends nothing for `auto`). */
const EFFORT: [
  driver: string,
  dir: string,
  path: string,
  id: string,
  sent: (b: Item) => unknown,
][] = [
  ["openai-chat", "openai", "/v1/chat/completions", "fixture-model", (b) => b.reasoning_effort],
  [
    "openai-responses",
    "responses",
    "/v1/responses",
    "o4-mini",
    (b) => (b.reasoning as Item | undefined)?.effort,
  ],
  [
    "anthropic-messages",
    "anthropic",
    "/v1/messages",
    "claude-sonnet-4-5",
    (b) => (b.thinking as Item | undefined)?.type,
  ],
];
for (const [driver, dir, path, id, sent] of EFFORT) {
  Deno.test(`${driver}: the model's effort control is the request's reasoning effort; auto sends none`, async () => {
    const server = new OpenAIServer({ path });
    const effort = (f: { root: string }, v: string) =>
      Deno.writeTextFileSync(`${f.root}/model/fixture/chat.d/effort`, `${v}\n`);
    const w = await world(server, { driver, id, prepare: (f) => effort(f, "high") });
    server.push(fixture("plain", dir), fixture("plain", dir));
    try {
      assertEquals((await send(w, "one")).code, 0);
      effort(w.f, "auto"); // read again by the next run (no restart)
      assertEquals((await send(w, "two")).code, 0);
      const want = driver === "anthropic-messages" ? "enabled" : "high";
      assertEquals(server.requests.map((r) => sent(r.body)), [want, undefined]);
    } finally {
      await end(w, server);
    }
  });
}

Deno.test("anthropic-messages: with effort on, a tool loop sends the turn's signed thinking block back before its tool_use", async () => {
  const server = new OpenAIServer({ path: "/v1/messages" });
  const w = await world(server, {
    driver: "anthropic-messages",
    id: "claude-sonnet-4-5",
    prepare: (f) => Deno.writeTextFileSync(`${f.root}/model/fixture/chat.d/effort`, "high\n"),
  });
  server.push(fixture("thinking_tool", "anthropic"), fixture("after_tool", "anthropic"));
  try {
    const out = await send(w, "read hello.txt");
    assertEquals(out.code, 0, out.stderr);
    const assistant = items(server.requests[1].body.messages).find((m) => m.role === "assistant");
    assertEquals(items(assistant?.content).map((p) => p.type), ["thinking", "tool_use"]);
    assertEquals(items(assistant?.content)[0], {
      type: "thinking",
      thinking: "The user wants a greeting.",
      signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    });
  } finally {
    await end(w, server);
  }
});

/** Live servers, when reachable: the same plain answer and tool call against the real API. */
const LIVE: Record<string, string> = {
  "openai-responses": "CTX_TEST_RESPONSES",
  "anthropic-messages": "CTX_TEST_ANTHROPIC",
};
for (const [driver, env] of Object.entries(LIVE)) {
  const base = Deno.env.get(`${env}_BASE_URL`);
  const model = Deno.env.get(`${env}_MODEL`) ?? "";
  const key = Deno.env.get(`${env}_API_KEY`);
  const live = () => world({ baseURL: base ?? "" }, { driver, id: model, key, limit: 131072 });
  Deno.test({
    name: `${driver} live (${env}_BASE_URL, _MODEL, _API_KEY): a plain answer`,
    ignore: !base || !model,
    async fn() {
      const w = await live();
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
    name: `${driver} live (${env}_BASE_URL, _MODEL, _API_KEY): one tool call reads hello.txt`,
    ignore: !base || !model,
    async fn() {
      const w = await live();
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
}

Deno.test("anthropic-messages: thinking streams as reasoning_delta frames, never part of the answer", async () => {
  const server = new OpenAIServer({ path: "/v1/messages" });
  const w = await world(server, { driver: "anthropic-messages" });
  server.push(fixture("thinking", "anthropic"));
  try {
    const out = await send(w, "hi");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(types(events), [
      "start",
      "reasoning_delta",
      "reasoning_delta",
      "delta",
      "usage",
      "message",
      "done",
    ]);
    assertEquals(
      events.filter((e) => e.type === "reasoning_delta").map((e) => e.text).join(""),
      "The user wants a greeting.",
    );
    assertEquals(messages.at(-1)?.content, [{ type: "text", text: "Hello, world." }]);
  } finally {
    await end(w, server);
  }
});
