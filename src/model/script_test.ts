import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import type { ModelEvent, ModelRequest } from "./driver.ts";
import { parseScript, scriptDriver } from "./script.ts";

Deno.test("parseScript() reads one turn a line, skipping blanks and # comments", () => {
  assertEquals(
    parseScript(
      '# demo\n{"text":"hi"}\n\n{"text":["a","b"],"tool_calls":[{"name":"tsh","arguments":{"args":["tools"]}}]}\n',
    ),
    [{ text: "hi" }, {
      text: ["a", "b"],
      tool_calls: [{ name: "tsh", arguments: { args: ["tools"] } }],
    }],
  );
});

Deno.test("parseScript() answers EINVAL naming the line for bad JSON, unknown keys, unknown errnos", () => {
  for (
    const [text, why] of [
      ["{nope\n", "script line 1 is not JSON"],
      ['{"text":"a"}\n{"txt":"b"}\n', "script line 2: turn:"],
      [
        '{"error":{"code":"EWHAT","message":"x"}}\n',
        "script line 1: error.code: not a known errno",
      ],
      ['{"tool_calls":[{"name":"tsh"}]}\n', "script line 1: tool_calls.0.arguments:"],
    ]
  ) {
    const e = assertThrows(() => parseScript(text), CtxError);
    assertEquals(e.errno, "EINVAL");
    assertEquals(e.message.startsWith(why), true, `${e.message} !~ ${why}`);
  }
});

async function events(req: ModelRequest): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const ev of scriptDriver.stream(req)) out.push(ev);
  return out;
}

Deno.test("scriptDriver replays turn N for the Nth call since the user message; {{input}} and {{result}} are filled", async () => {
  const root = await Deno.makeTempDir();
  try {
    const uid = Deno.uid() ?? 0, gid = Deno.gid() ?? 0;
    const home = `${root}/home/${uid}/agent/a`;
    Deno.mkdirSync(home, { recursive: true });
    Deno.writeTextFileSync(
      `${home}/script.jsonl`,
      '{"text":"on {{input}}","tool_calls":[{"name":"tsh","arguments":{"args":["tools"]}}]}\n' +
        '{"text":"got {{result}}","usage":{"input_tokens":1,"output_tokens":2}}\n',
    );
    const base = {
      model: "debug/script",
      caller: { root, agent: "a", uid, gid, groups: [] },
      signal: new AbortController().signal,
    };
    assertEquals(
      await events({ ...base, messages: [{ role: "user", content: "go" }] }),
      [
        { type: "delta", text: "on go" },
        { type: "tool_call", id: "script-1-1", name: "tsh", arguments: { args: ["tools"] } },
        { type: "usage", input_tokens: 1, output_tokens: 2 },
        { type: "finish", reason: "tool_calls" },
      ],
    );
    const later = [
      { role: "user" as const, content: "go" },
      { role: "assistant" as const, content: "on go" },
      { role: "tool" as const, tool_call_id: "script-1-1", name: "tsh", content: "LIST" },
    ];
    assertEquals(await events({ ...base, messages: later }), [
      { type: "delta", text: "got LIST" },
      { type: "usage", input_tokens: 1, output_tokens: 2 },
      { type: "finish", reason: "stop" },
    ]);
    const past = [...later, { role: "assistant" as const, content: "got LIST" }];
    const e = await events({ ...base, messages: past }).catch((x) => x);
    assertEquals([e.errno, e.message], ["ENODATA", "script.jsonl has 2 turns; call 3 has none"]);
    Deno.removeSync(`${home}/script.jsonl`);
    const missing = await events({ ...base, messages: later }).catch((x) => x);
    assertEquals(missing.errno, "ENOENT");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
