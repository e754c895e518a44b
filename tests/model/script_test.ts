/** `debug/script` end to end: a real daemon replays a script whose tool call reads a workspace file through tsh. */
import { assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import {
  cleanup,
  ctx,
  history,
  makeTree,
  shape,
  startRuntimeDaemon,
  type Tree,
  workspace,
} from "../fixture/mod.ts";

/** Adds a model-backed agent on `debug/script` with `script` (JSONL lines) in its home. */
function scripted(f: Tree, name: string, lines: unknown[]): void {
  createAgent(f.root, name, { uid: 0, gid: 0, model: "debug/script" });
  Deno.writeTextFileSync(
    `${f.root}/home/0/agent/${name}/script.jsonl`,
    lines.map((l) => JSON.stringify(l)).join("\n") + "\n",
  );
}

Deno.test("debug/script: a scripted tsh fs.read call reads the workspace file and the result reaches the next turn", async () => {
  const f = await makeTree();
  scripted(f, "m", [
    {
      text: ["Reading ", "it."],
      tool_calls: [{ id: "c1", name: "tsh", arguments: { args: ["fs.read", "hello.txt"] } }],
    },
    { text: "It says: {{result}}" },
  ]);
  const ws = await workspace(f, { "hello.txt": "hello from the workspace\n" });
  const d = await startRuntimeDaemon(f);
  try {
    const out = await ctx(f, ["agent", "send", "m", "read hello.txt"], { cwd: ws });
    assertEquals(out.code, 0, out.stderr);
    const { events, messages } = history(f, "m");
    const types = events.map((e) => e.type);
    assertEquals(types, [
      "start",
      "delta",
      "delta",
      "usage",
      "tool_call",
      "message",
      "delta",
      "usage",
      "message",
      "done",
    ]);
    assertEquals(shape(events.filter((e) => e.type === "tool_call")), [
      {
        type: "tool_call",
        run: "<run>",
        id: "<id>",
        name: "tsh",
        arguments: { args: ["fs.read", "hello.txt"] },
      },
    ]);
    const final = messages.at(-1) as { content: { text: string }[] };
    assertEquals(final.content[0].text, "It says: hello from the workspace\n");
    assertEquals(messages.map((m) => m.role), ["user", "tool", "assistant"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
