/** Request frame validation: defaults, rejects, strict approve. */
import { assertEquals } from "../../tests/assert.ts";
import { request } from "./frames.ts";

Deno.test("request() fills send defaults and keeps the fields", () => {
  assertEquals(request.parse({ op: "send", id: "m-1", input: "hi", extra: 1 }), {
    op: "send",
    id: "m-1",
    session: "default",
    scope: "private",
    input: "hi",
  });
});

Deno.test("request(): a send's session null (the runtime picks index/current) stays null; absent is default", () => {
  assertEquals(request.parse({ op: "send", id: "m-1", session: null, input: "hi" }), {
    op: "send",
    id: "m-1",
    session: null,
    scope: "private",
    input: "hi",
  });
  assertEquals(request.parse({ op: "tsh", id: "t-1", args: [] }), {
    op: "tsh",
    id: "t-1",
    session: "default",
    args: [],
  });
});

Deno.test("request() rejects bad ids, sessions, scopes and args", () => {
  const bad = [
    { op: "send", id: "", input: "x" },
    { op: "send", id: "a b", input: "x" },
    { op: "send", id: "x".repeat(129), input: "x" },
    { op: "send", id: "i", session: "../up", input: "x" },
    { op: "send", id: "i", session: "index", input: "x" },
    { op: "send", id: "i", session: "s.sock", input: "x" },
    { op: "send", id: "i", scope: "public", input: "x" },
    { op: "send", id: "i", cwd: "relative", input: "x" },
    { op: "send", id: "i" },
    { op: "tsh", id: "i", args: "ls" },
    { op: "tsh", id: "i", args: [1] },
    { op: "cancel" },
    { op: "resume", session: 3 },
  ];
  assertEquals(bad.map((b) => request.safeParse(b).success), bad.map(() => false));
});

Deno.test("approve frames carry exactly op, run, id and decision", () => {
  const ok = { op: "approve", run: "r", id: "c", decision: "allow_once" };
  assertEquals(request.safeParse(ok).success, true);
  assertEquals(request.safeParse({ ...ok, decision: "yes" }).success, false);
  assertEquals(request.safeParse({ ...ok, note: "x" }).success, false);
});

Deno.test("server frames: the strict schemas accept what the runtime writes and nothing else", async () => {
  const { errorOf, replayOf, serverFrameStrict } = await import("./frames.ts");
  const ok = [
    { type: "delta", run: "r", text: "hi" },
    { type: "done", run: "r", status: "cancelled", ts: 1 },
    errorOf("EINVAL", "bad", { id: "m-1" }),
    errorOf("EIO", "candidate failed", { run: "r", model: "a/b", recoverable: true }),
    replayOf({ type: "tool_call", run: "r", id: "c1", name: "tsh", arguments: { args: ["x"] } }),
    { type: "ack", op: "cancel", run: "r", status: "active" },
    { type: "history", session: "s", role: "user", run: "r", content: "hi" },
  ];
  for (const f of ok) assertEquals(serverFrameStrict.safeParse(f).success, true, JSON.stringify(f));
  const bad = [
    { type: "delta", run: "r", text: "hi", extra: 1 }, // a stray field
    { type: "done", run: "r", status: "finished", ts: 1 }, // not a run status
    { type: "error", message: "no code" },
    { type: "usage", run: "r", input_tokens: "3", output_tokens: 1 },
    { type: "nonsense" },
    { type: "ack", op: "cancel", run: "r", status: "active", replay: true }, // replies are never replayed
  ];
  for (const f of bad) {
    assertEquals(serverFrameStrict.safeParse(f).success, false, JSON.stringify(f));
  }
});
