/** sdk-envelope-v1 invocation and agent frame schemas. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { agentFrame, clampUtf8, encodeInvocation, invocation } from "./envelope.ts";

const base = {
  schema: "cortexfs.agent-invocation/v1" as const,
  run: "ctx-1",
  step: 0,
  input: "hi",
  history_messages: "[]",
  tool_context: "",
  observation: null,
};
const obs = {
  tool_call_id: "c",
  name: "tsh",
  status: "ok" as const,
  content: "x",
  truncated: false,
};

Deno.test("encodeInvocation() writes exactly one JSON line with the fields in order", () => {
  const text = new TextDecoder().decode(encodeInvocation(base));
  assertEquals(text, JSON.stringify(base) + "\n");
});

Deno.test("invocation rejects unknown/missing fields, step/observation mismatch and oversize", () => {
  const bad = [
    { ...base, extra: 1 },
    { ...base, observation: undefined },
    { ...base, step: 1 },
    { ...base, observation: obs },
    { ...base, step: 9, observation: obs },
    { ...base, input: "x".repeat(64 * 1024 + 1) },
    { ...base, step: 1, observation: { ...obs, content: "y".repeat(16 * 1024 + 1) } },
    { ...base, step: 1, observation: { ...obs, extra: true } },
  ];
  assertEquals(bad.map((b) => invocation.safeParse(b).success), bad.map(() => false));
  assertEquals(invocation.safeParse({ ...base, step: 1, observation: obs }).success, true);
  assertThrows(() => encodeInvocation({ ...base, step: 1 }));
});

Deno.test("agent frames: only delta, message, tool_call, error; host frames are refused", () => {
  const ok = [
    { type: "delta", text: "a" },
    { type: "message", role: "assistant", content: "a" },
    { type: "message", role: "assistant", content: [{ type: "text", text: "a" }] },
    { type: "tool_call", id: "c-1", name: "tsh", arguments: { args: ["tools"] } },
    { type: "error", code: "EIO", message: "m" },
  ];
  const bad = [
    { type: "start" },
    { type: "done", status: "ok" },
    { type: "tool_result", tool_call_id: "c", content: "x" },
    { type: "approval_result", id: "c", decision: "allow_once" },
    { type: "message", role: "user", content: "a" },
    { type: "tool_call", id: "c", name: "tsh" },
    { type: "tool_call", id: "c", name: "../x", arguments: {} },
    { type: "delta", text: "a", run: "r" },
  ];
  assertEquals(ok.map((f) => agentFrame.safeParse(f).success), ok.map(() => true));
  assertEquals(bad.map((f) => agentFrame.safeParse(f).success), bad.map(() => false));
});

Deno.test("clampUtf8() cuts on a character boundary", () => {
  assertEquals(clampUtf8("aé", 2), { text: "a", truncated: true });
  assertEquals(clampUtf8("aé", 3), { text: "aé", truncated: false });
});
