/** Fallback end to end: the agent's model, then its `fallback` chain; each failed candidate is an auditable recoverable error. */
import { assertEquals } from "../assert.ts";
import { ctx, history } from "../fixture/mod.ts";
import { fixture, OpenAIServer } from "./openai_server.ts";
import { end, send, types, world } from "./world.ts";

Deno.test("fallback: a provider failure (401 EACCES) moves to the next candidate; its error is recorded with the model, then the answer", async () => {
  const server = new OpenAIServer();
  server.push(fixture("unauthorized"), fixture("plain"));
  const w = await world(server, {
    more: [{ ref: "fixture/backup", limit: 131072, id: "backup-model" }],
    fallback: ["fixture/backup"],
  });
  try {
    const out = await send(w, "hello");
    assertEquals([out.code, out.stdout.trim()], [0, "Hello, world."], out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(types(events), ["start", "error", "delta", "delta", "usage", "message", "done"]);
    assertEquals(events[1], {
      type: "error",
      run: events[0].id,
      code: "EACCES",
      message:
        "model fixture/chat failed; trying fixture/backup: provider answered HTTP 401: Incorrect API key provided.",
      model: "fixture/chat",
      recoverable: true,
    });
    assertEquals(events.at(-1)?.status, "ok");
    assertEquals(server.requests.map((r) => r.body.model), ["fixture-model", "backup-model"]);
    assertEquals(messages.map((m) => m.role), ["user", "assistant"]);
    // The run's outcome is the answer: the candidate's error is not its errno.
    const h = await ctx(w.f, ["agent", "history", "m", "--json"]);
    assertEquals(
      JSON.parse(h.stdout).map((
        r: { status: string; errno: string | null },
      ) => [r.status, r.errno]),
      [["ok", null]],
    );
  } finally {
    await end(w, server);
  }
});

Deno.test("fallback: with an explicit window a candidate whose limit is smaller is ineligible (EINVAL, never called)", async () => {
  const server = new OpenAIServer();
  server.push(fixture("server_error"), fixture("server_error"), fixture("server_error"));
  server.push(fixture("server_error"), fixture("plain"));
  const w = await world(server, {
    window: 100000,
    more: [
      { ref: "fixture/small", limit: 8192, id: "small-model" },
      { ref: "fixture/big", limit: 200000, id: "big-model" },
    ],
    fallback: ["fixture/small", "fixture/big"],
  });
  try {
    const out = await send(w, "hello");
    assertEquals(out.code, 0, out.stderr);
    const { events } = history(w.f, "m");
    const errors = events.filter((e) => e.type === "error").map((e) => [e.model, e.code]);
    assertEquals(errors, [["fixture/chat", "EIO"], ["fixture/small", "EINVAL"]]);
    assertEquals(
      String(events.find((e) => e.model === "fixture/small")?.message),
      "model fixture/small failed; trying fixture/big: window 100000 is larger than the limit 8192 of fixture/small",
    );
    // Four tries of the 5xx primary (retries with backoff), none of small, one of big.
    assertEquals(server.requests.map((r) => r.body.model), [
      ...Array(4).fill("fixture-model"),
      "big-model",
    ]);
    assertEquals(events.at(-1)?.status, "ok");
  } finally {
    await end(w, server);
  }
});

Deno.test("fallback: when every candidate fails the run ends with the last one's error; a missing fallback model is a candidate error (ENOENT)", async () => {
  const server = new OpenAIServer();
  server.push(fixture("unauthorized"), fixture("unauthorized"));
  const w = await world(server, {
    more: [{ ref: "fixture/backup", limit: 131072, id: "backup-model" }],
    fallback: ["fixture/gone", "fixture/backup"],
  });
  try {
    const out = await send(w, "hello");
    assertEquals(out.code !== 0, true);
    const { events } = history(w.f, "m");
    assertEquals(types(events), ["start", "error", "error", "error", "done"]);
    assertEquals(events.slice(1, 4).map((e) => [e.model, e.code, e.recoverable]), [
      ["fixture/chat", "EACCES", true],
      ["fixture/gone", "ENOENT", true],
      [undefined, "EACCES", undefined],
    ]);
    assertEquals(
      String(events[3].message),
      "model fixture/backup: provider answered HTTP 401: Incorrect API key provided.",
    );
    assertEquals(events[4].status, "error");
  } finally {
    await end(w, server);
  }
});

Deno.test("fallback: with window auto a candidate whose limit cannot hold the request is E2BIG and the next, larger one takes it", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"));
  const w = await world(server, {
    limit: 300,
    more: [{ ref: "fixture/big", limit: 200000, id: "big-model" }],
    fallback: ["fixture/big"],
  });
  try {
    const out = await send(w, "hello");
    assertEquals(out.code, 0, out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(events.filter((e) => e.type === "error").map((e) => [e.model, e.code]), [
      ["fixture/chat", "E2BIG"],
    ]);
    assertEquals(server.requests.map((r) => r.body.model), ["big-model"]);
    assertEquals(messages.map((m) => m.role), ["user", "assistant"]);
  } finally {
    await end(w, server);
  }
});
