/** The offline first run through a real cortexfsd and its mount: switch coder to debug/script, write a script, read a file via tsh. */
import { assertEquals } from "../assert.ts";
import {
  cleanup,
  ctxArgv,
  type Daemon,
  makeTree,
  sh,
  startDaemon,
  workspace,
} from "../fixture/mod.ts";

Deno.test("first run: `debug/script` set and scripted through /ctx, `ctx agent send` reads a workspace file through tsh", async () => {
  const t = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(t);
    const ws = await workspace(t, { "hello.txt": "hello through the mount\n" });
    const script = [
      { tool_calls: [{ id: "c1", name: "tsh", arguments: { args: ["fs.read", "hello.txt"] } }] },
      { text: "hello.txt says: {{result}}" },
    ].map((l) => JSON.stringify(l)).join("\n");
    const m = t.mount;
    const cli = ctxArgv().map((a) => `'${a}'`).join(" ");
    const out = await sh(
      `set -e; echo debug/script > ${m}/agent/coder.d/model
cat > ${m}/home/0/agent/coder/script.jsonl
CTX_ROOT=${m} ${cli} agent send coder "read hello.txt"`,
      { cwd: ws, stdin: script + "\n" },
    );
    assertEquals(
      [out.code, out.stdout],
      [0, "hello.txt says: hello through the mount\n"],
      out.stderr,
    );
    assertEquals(Deno.readTextFileSync(`${m}/agent/coder.d/model`), "debug/script\n");
    const events = Deno.readTextFileSync(`${m}/home/0/agent/coder/session/default/events.jsonl`)
      .trim().split("\n").map((l) => JSON.parse(l).type);
    assertEquals(events, [
      "start",
      "usage",
      "tool_call",
      "message",
      "delta",
      "usage",
      "message",
      "done",
    ]);
  } finally {
    await cleanup(t, d);
  }
});
