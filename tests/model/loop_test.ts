/** The tool loop of model-backed runs (driven by `debug/script`): limits, ids, direct-native tools, authority, approval. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import {
  cleanup,
  ctx,
  history,
  makeTree,
  Raw,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

/** A model-backed agent on `debug/script` with `lines` as its script; returns its workspace. */
function scripted(
  f: Tree,
  name: string,
  lines: unknown[],
  options: { perm?: string; tools?: string[]; approval?: "ask" } = {},
): string {
  createAgent(f.root, name, { uid: 0, gid: 0, model: "debug/script", perm: options.perm });
  const d = `${f.root}/agent/${name}.d`;
  if (options.tools) replaceFile(`${d}/tools`, options.tools.map((t) => `${t}\n`).join(""));
  if (options.approval) replaceFile(`${d}/approval`, `${options.approval}\n`);
  Deno.writeTextFileSync(
    `${f.root}/home/0/agent/${name}/script.jsonl`,
    lines.map((l) => JSON.stringify(l)).join("\n") + "\n",
  );
  const ws = `${f.dir}/ws-${name}`;
  Deno.mkdirSync(ws);
  Deno.writeTextFileSync(`${ws}/hello.txt`, "hi\n");
  return ws;
}

const read = (id?: string) => ({
  ...(id ? { id } : {}),
  name: "tsh",
  arguments: { args: ["fs.read", "hello.txt"] },
});

/** Tool results of the last run as [name, status, errno, content]. */
function results(f: Tree, agent: string) {
  return history(f, agent).events.filter((e) => e.type === "message" && e.role === "tool").map(
    (e) => {
      const [p] = e.content as { status: string; errno?: string; content: string }[];
      return [e.name, p.status, p.errno ?? null, p.content];
    },
  );
}

Deno.test("model loop: the ninth tool call of a run is refused E2BIG after eight ran; nothing more is dispatched", async () => {
  const f = await makeTree();
  const turn = { tool_calls: [read()] };
  const ws = scripted(f, "m", [...Array(9).fill(turn), { text: "never" }]);
  const d = await startRuntimeDaemon(f);
  try {
    const out = await ctx(f, ["agent", "send", "m", "loop"], { cwd: ws });
    assertEquals(out.code !== 0, true);
    const { events } = history(f, "m");
    assertEquals(events.filter((e) => e.type === "tool_call").length, 8);
    assertEquals(events.slice(-2).map((e) => [e.type, e.code ?? e.status]), [
      ["error", "E2BIG"],
      ["done", "error"],
    ]);
    assertEquals(events.at(-2)?.message, "more than 8 tool calls in one run");
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("model loop: a repeated or missing call id gets a fresh host id; results are fed back in call order", async () => {
  const f = await makeTree();
  const ws = scripted(f, "m", [
    { tool_calls: [read("dup"), read("dup"), read()] },
    { text: "{{result}}" },
  ]);
  const d = await startRuntimeDaemon(f);
  try {
    assertEquals((await ctx(f, ["agent", "send", "m", "x"], { cwd: ws })).code, 0);
    const ids = history(f, "m").events.filter((e) => e.type === "tool_call").map((e) => e.id);
    assertEquals(ids, ["dup", "call-2", "script-1-3"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("model loop: a .d/tools declaration is offered and callable directly; an undeclared direct call is EACCES", async () => {
  const f = await makeTree();
  const ws = scripted(f, "m", [
    {
      tool_calls: [
        { id: "d1", name: "fs_read", arguments: { path: "hello.txt" } },
        { id: "d2", name: "fs.list", arguments: { path: "." } },
      ],
    },
    { text: "ok" },
  ], { tools: ["fs.read"] });
  const d = await startRuntimeDaemon(f);
  try {
    assertEquals((await ctx(f, ["agent", "send", "m", "x"], { cwd: ws })).code, 0);
    const calls = history(f, "m").events.filter((e) => e.type === "tool_call").map((e) => e.name);
    // The wire name fs_read is recorded as the tool's real name.
    assertEquals(calls, ["fs.read", "fs.list"]);
    assertEquals(results(f, "m"), [
      ["fs.read", "ok", null, "hi\n"],
      ["fs.list", "error", "EACCES", '"fs.list" is not declared in agent/m.d/tools'],
    ]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("model loop: calls go through the authority path: perm r-- refuses bash (EACCES) and the refusal is fed back, not fatal", async () => {
  const f = await makeTree();
  const ws = scripted(f, "m", [
    { tool_calls: [{ id: "b1", name: "tsh", arguments: { args: ["bash", "id"] } }] },
    { text: "after: {{result}}" },
  ], { perm: "r--" });
  const d = await startRuntimeDaemon(f);
  try {
    const out = await ctx(f, ["agent", "send", "m", "x"], { cwd: ws });
    assertEquals(out.code, 0, out.stderr);
    const [[name, status, errno]] = results(f, "m");
    assertEquals([name, status, errno], ["tsh", "error", "EACCES"]);
    const final = history(f, "m").messages.at(-1) as { content: { text: string }[] };
    assert(final.content[0].text.startsWith("after: error EACCES: "), final.content[0].text);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("model loop: approval=ask asks on the run's connection before the model's call runs; allow_once runs it", async () => {
  const f = await makeTree();
  // A raw client's workspace is its own cwd (the checkout): the call reads deno.json there.
  const call = { id: "a1", name: "tsh", arguments: { args: ["fs.read", "deno.json"] } };
  scripted(f, "m", [{ tool_calls: [call] }, { text: "{{result}}" }], { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  const c = await Raw.connect(`${f.root}/agent/m.sock`);
  try {
    c.write({ op: "send", id: "s-1", session: "default", input: "go" });
    const req = (await c.until((fs) => fs.some((x) => x.type === "approval_request"))).find((x) =>
      x.type === "approval_request"
    );
    assertEquals([req?.id, req?.name, req?.args], ["a1", "fs.read", ["fs.read", "deno.json"]]);
    c.write({ op: "approve", run: req?.run, id: "a1", decision: "allow_once" });
    const frames = await c.run();
    assertEquals(frames.at(-1)?.status, "ok");
    const [[name, status]] = results(f, "m");
    assertEquals([name, status], ["tsh", "ok"]);
    assertEquals(
      frames.map((x) => x.type).filter((t) => t !== "delta" && t !== "usage"),
      ["start", "tool_call", "approval_request", "approval_result", "message", "message", "done"],
    );
  } finally {
    c.close();
    await d.stop();
    await cleanup(f);
  }
});
