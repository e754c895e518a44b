import { assertEquals } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import {
  delayOf,
  errnoOfStatus,
  mapError,
  MAX_DELAY_MS,
  retryable,
  sdkMessages,
} from "./openai.ts";

Deno.test("errnoOfStatus() maps provider HTTP statuses to stable errnos", () => {
  const rows = [400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503].map((s) => [
    s,
    errnoOfStatus(s),
  ]);
  assertEquals(rows, [
    [400, "EINVAL"],
    [401, "EACCES"],
    [403, "EACCES"],
    [404, "ENOENT"],
    [408, "ETIMEDOUT"],
    [413, "E2BIG"],
    [422, "EINVAL"],
    [429, "EAGAIN"],
    [500, "EIO"],
    [502, "EIO"],
    [503, "EIO"],
  ]);
  assertEquals([429, 500, 503, 400, 401, undefined].map(retryable), [
    true,
    true,
    true,
    false,
    false,
    false,
  ]);
});

Deno.test("delayOf() doubles from 200 ms, honours a numeric Retry-After, never waits past the cap", () => {
  assertEquals([0, 1, 2, 3].map((n) => delayOf(n)), [200, 400, 800, 1600]);
  assertEquals(delayOf(0, { "retry-after": "2" }), 2000);
  assertEquals(delayOf(0, { "retry-after": "0" }), 0);
  assertEquals(delayOf(0, { "retry-after": "600" }), MAX_DELAY_MS);
  assertEquals(delayOf(1, { "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }), 400);
  assertEquals(delayOf(10), MAX_DELAY_MS);
  assertEquals(delayOf(0, { "retry-after-ms": "150", "retry-after": "1" }), 150);
  assertEquals(delayOf(0, { "retry-after-ms": "soon", "retry-after": "1" }), 1000);
});

Deno.test("mapError() keeps the status's errno and never repeats the key", () => {
  const e = Object.assign(new Error("Incorrect API key provided: sk-secret-1"), {
    name: "AI_APICallError",
    statusCode: 401,
  });
  const got = mapError(e, "sk-secret-1");
  assertEquals(got instanceof CtxError, true);
  assertEquals([got.errno, got.message], [
    "EACCES",
    "provider answered HTTP 401: Incorrect API key provided: <redacted>",
  ]);
  const refused = mapError(
    Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } }),
    undefined,
  );
  assertEquals(refused.errno, "ECONNREFUSED");
  // Deno's fetch says it only in the cause's message.
  const deno = Object.assign(new Error("Cannot connect to API: error sending request"), {
    name: "AI_APICallError",
    cause: new Error("tcp connect error: Connection refused (os error 111)"),
  });
  assertEquals(mapError(deno, undefined).errno, "ECONNREFUSED");
  assertEquals(mapError(new Error("boom"), undefined).errno, "EIO");
});

Deno.test("sdkMessages() turns tool calls and tool results into AI SDK parts", () => {
  assertEquals(
    sdkMessages([
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: "a",
        tool_calls: [{ id: "c1", name: "tsh", arguments: { args: ["tools"] } }],
      },
      { role: "tool", tool_call_id: "c1", name: "tsh", content: "out" },
      { role: "assistant", content: "done" },
    ]),
    [
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "a" },
          { type: "tool-call", toolCallId: "c1", toolName: "tsh", input: { args: ["tools"] } },
        ],
      },
      {
        role: "tool",
        content: [{
          type: "tool-result",
          toolCallId: "c1",
          toolName: "tsh",
          output: { type: "text", value: "out" },
        }],
      },
      { role: "assistant", content: "done" },
    ],
  );
});

Deno.test("mapError() gives an error event of a 200 stream the errno of the status it stands for", () => {
  const normalized = (o: Record<string, unknown>) =>
    Object.assign(new Error(String(o.message)), { name: "AI_StreamProviderError", ...o });
  const rows = [
    normalized({ message: "Overloaded", type: "overloaded_error", statusCode: 529 }),
    normalized({ message: "slow down", type: "rate_limit_error" }),
    normalized({ message: "boom", type: "error", code: "server_error" }),
    { message: "raw chunk", type: "server_error", param: null, code: null },
    { message: "odd", type: "invalid_request_error" },
    new Error("not a stream error"),
  ].map((e) => {
    const err = mapError(e, undefined);
    return [err.errno, err.message];
  });
  assertEquals(rows, [
    ["EIO", "provider sent an error in its stream: overloaded_error: Overloaded"],
    ["EAGAIN", "provider sent an error in its stream: rate_limit_error: slow down"],
    ["EIO", "provider sent an error in its stream: server_error: boom"],
    ["EIO", "provider sent an error in its stream: server_error: raw chunk"],
    ["EINVAL", "provider sent an error in its stream: invalid_request_error: odd"],
    ["EIO", "provider request failed: not a stream error"],
  ]);
});

Deno.test("sdkMessages() puts a tool-call turn's kept reasoning parts before its text", () => {
  const signed = {
    type: "reasoning",
    text: "t",
    providerOptions: { anthropic: { signature: "s" } },
  };
  assertEquals(
    sdkMessages([
      { role: "assistant", content: "a", tool_calls: [{ id: "c1", name: "tsh", arguments: {} }] },
      { role: "assistant", content: "b", tool_calls: [{ id: "c2", name: "tsh", arguments: {} }] },
    ], { reasoning: (id) => (id === "c1" ? [signed] : undefined) }),
    [
      {
        role: "assistant",
        content: [
          signed,
          { type: "text", text: "a" },
          { type: "tool-call", toolCallId: "c1", toolName: "tsh", input: {} },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "b" },
          { type: "tool-call", toolCallId: "c2", toolName: "tsh", input: {} },
        ],
      },
    ],
  );
});
