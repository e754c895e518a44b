/** Context window admission end to end: whole history turns newest first within the window, E2BIG when nothing fits. */
import { assert, assertEquals } from "../assert.ts";
import { history } from "../fixture/mod.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { promptBudget } from "../../src/abi/window.ts";
import { jsonBytes } from "../../src/prompt/admit.ts";
import { TSH_TOOL } from "../../src/prompt/offer.ts";
import { fixture, OpenAIServer } from "./openai_server.ts";
import { end, send, types, world } from "./world.ts";

// window 2000 tokens: reserve min(4096, 500) = 500, so requests may be 8000 - 2000 = 6000 bytes.
const WINDOW = 2000;

Deno.test("window: older history turns are left out whole (newest first) when the window cannot carry them; the stored history keeps them", async () => {
  const server = new OpenAIServer();
  for (let i = 0; i < 4; i++) server.push(fixture("plain"));
  const w = await world(server);
  try {
    const big = (c: string) => c.repeat(1500);
    assertEquals((await send(w, big("a"))).code, 0);
    // The window is re-read for every run: size it so one earlier turn fits beside the request
    // and two do not (the system message has the same length in every run).
    const system = {
      role: "system",
      content: String(server.requests[0].body.messages?.[0].content),
    };
    const fixed = jsonBytes([system, { role: "user", content: big("b") }]) + jsonBytes([TSH_TOOL]);
    const turn = jsonBytes({ role: "user", content: big("a") }) +
      jsonBytes({ role: "assistant", content: "Hello, world." }) + 2;
    let window = 1;
    while (promptBudget(window) < fixed + turn + turn / 2) window++;
    replaceFile(`${w.f.root}/agent/m.d/window`, `${window}\n`);
    for (const c of ["b", "c"]) assertEquals((await send(w, big(c))).code, 0);
    assertEquals((await send(w, "short")).code, 0);
    const sent = (n: number) =>
      (server.requests[n].body.messages ?? []).map((m) => [
        m.role,
        String(m.content).slice(0, 1),
      ]);
    // Run 2 carries run 1's turn; run 3 only run 2's; run 4 (short) two turns (never part of one).
    assertEquals(sent(1), [["system", "#"], ["user", "a"], ["assistant", "H"], ["user", "b"]]);
    assertEquals(sent(2), [["system", "#"], ["user", "b"], ["assistant", "H"], ["user", "c"]]);
    assertEquals(sent(3), [
      ["system", "#"],
      ["user", "b"],
      ["assistant", "H"],
      ["user", "c"],
      ["assistant", "H"],
      ["user", "s"],
    ]);
    assertEquals(history(w.f, "m").messages.length, 8);
  } finally {
    await end(w, server);
  }
});

Deno.test("window: a request that cannot fit even without history is E2BIG: no model call, only start, error and done recorded, no user message", async () => {
  const server = new OpenAIServer();
  const w = await world(server, { window: WINDOW });
  try {
    const out = await send(w, "x".repeat(6000));
    assertEquals(out.code !== 0, true);
    assert(out.stderr.includes("E2BIG"), out.stderr);
    const { events, messages } = history(w.f, "m");
    assertEquals(types(events), ["start", "error", "done"]);
    assertEquals(events[1].code, "E2BIG");
    assert(
      /needs \d+ bytes without any history .* window of 2000 tokens of fixture\/chat admits 6000 bytes/
        .test(String(events[1].message)),
      String(events[1].message),
    );
    assertEquals(events[2].status, "error");
    assertEquals(messages, []);
    assertEquals(server.requests.length, 0);
  } finally {
    await end(w, server);
  }
});

Deno.test("window: admission is checked before every model call of a run: a tool result that outgrows the window ends the run E2BIG after the call", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"), fixture("tool_call"));
  const w = await world(server);
  try {
    Deno.writeTextFileSync(`${w.ws}/hello.txt`, "y".repeat(12_000));
    assertEquals((await send(w, "probe")).code, 0);
    const system = {
      role: "system",
      content: String(server.requests[0].body.messages?.[0].content),
    };
    const fixed = jsonBytes([system, { role: "user", content: "read it" }]) +
      jsonBytes([TSH_TOOL]);
    let window = 1;
    while (promptBudget(window) < fixed + 2000) window++;
    replaceFile(`${w.f.root}/agent/m.d/window`, `${window}\n`);
    const out = await send(w, "read it");
    assertEquals(out.code !== 0, true);
    const { events } = history(w.f, "m");
    const run = events.filter((e) => e.run === events.findLast((x) => x.type === "start")?.id);
    assertEquals(types(run), ["start", "usage", "tool_call", "message", "error", "done"]);
    assertEquals(run[4].code, "E2BIG");
    assertEquals(server.requests.length, 2); // the request with the big result was never sent
  } finally {
    await end(w, server);
  }
});
