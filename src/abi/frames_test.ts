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
