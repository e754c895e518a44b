import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { promptBudget } from "../abi/window.ts";
import type { ChatMessage } from "../model/driver.ts";
import { admit, jsonBytes, LEGACY_HISTORY, turnsOf } from "./admit.ts";

const sys: ChatMessage = { role: "system", content: "S" };
const u = (t: string): ChatMessage => ({ role: "user", content: t });
const a = (t: string): ChatMessage => ({ role: "assistant", content: t });

Deno.test("turnsOf() starts a turn at every user message", () => {
  assertEquals(turnsOf([a("0"), u("1"), a("1"), a("1b"), u("2")]), [
    [a("0")],
    [u("1"), a("1"), a("1b")],
    [u("2")],
  ]);
});

Deno.test("admit() charges the exact JSON bytes of the message array plus the tools", () => {
  const r = { system: sys, history: [[u("old"), a("ans")]], current: [u("now")], tools: [] };
  const got = admit(r, 1000);
  assertEquals(got.messages, [sys, u("old"), a("ans"), u("now")]);
  assertEquals(got.used, jsonBytes(got.messages) + jsonBytes([]));
  assertEquals(got.budget, promptBudget(1000));
});

Deno.test("admit() keeps the newest whole turns that fit and drops every older one", () => {
  const x = "x".repeat(100);
  const history = [[u(`1${x}`), a("a")], [u("2"), a(`b${x}`)], [u("3"), a("c")]];
  const r = { system: sys, history, current: [u("now")], tools: [] };
  const all = jsonBytes([sys, ...history.flat(), u("now")]) + 2;
  // One byte short of everything: the oldest turn goes, whole.
  let tokens = 1;
  while (promptBudget(tokens) < all - 1) tokens++;
  const got = admit(r, tokens - 1);
  assertEquals(got.dropped >= 1, true);
  assertEquals(got.messages.slice(1, -1), history.slice(got.dropped).flat());
});

Deno.test("admit() is E2BIG when the system message, the run's messages and tools alone do not fit", () => {
  const r = { system: sys, history: [], current: [u("y".repeat(5000))], tools: [] };
  const e = assertThrows(() => admit(r, 1000, "p/m"), CtxError);
  assertEquals(e.errno, "E2BIG");
  assertEquals(e.message.includes("the window of 1000 tokens of p/m admits 3000 bytes"), true);
});

Deno.test("admit() with an unknown window keeps at most the legacy history bytes and is never E2BIG", () => {
  const big = "z".repeat(LEGACY_HISTORY / 2);
  const history = [[u(big)], [u(big)], [u(big)]];
  const got = admit(
    { system: sys, history, current: [u("q".repeat(200_000))], tools: [] },
    undefined,
  );
  assertEquals(got.dropped, 2);
  assertEquals(got.budget, undefined);
});
