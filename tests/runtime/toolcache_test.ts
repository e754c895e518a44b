/** CTX_TOOL_CACHE in the daemon's environment bounds tsh load/pin through runTsh, never through a sandbox variable. */
import { assert, assertEquals } from "../assert.ts";
import { TSH_ENV } from "../../src/sandbox/env.ts";
import {
  addTestAgent,
  cleanup,
  makeTree,
  Raw,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

type F = Record<string, unknown>;

/** One socket `tsh` op; returns the tool result's content. */
async function tsh(f: Tree, args: string[]): Promise<string> {
  const c = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    c.write({ op: "tsh", id: crypto.randomUUID(), args });
    const frames = await c.run();
    const tool = frames.find((x) => x.type === "message" && x.role === "tool");
    assert(tool, JSON.stringify(frames));
    return String((tool.content as F[])[0].content);
  } finally {
    c.close();
  }
}

Deno.test("the daemon's CTX_TOOL_CACHE reaches tsh as its capacity, and no tool ever sees the variable", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  try {
    // Without the variable the tree's config (cache_capacity=32) applies: nothing is evicted.
    let d = await startRuntimeDaemon(f);
    try {
      assertEquals(
        [await tsh(f, ["load", "fs.read"]), await tsh(f, ["load", "fs.list"])],
        ["loaded fs.read\n", "loaded fs.list\n"],
      );
    } finally {
      await d.stop();
    }
    // With CTX_TOOL_CACHE=1 in the daemon's environment, one unpinned entry is kept.
    d = await startRuntimeDaemon(f, { env: { CTX_TOOL_CACHE: "1" } });
    try {
      assertEquals(
        [await tsh(f, ["load", "fs.stat"]), await tsh(f, ["loads"])],
        ["loaded fs.stat (evicted fs.read, fs.list)\n", "fs.stat\n"],
      );
      // bash's own environment as tsh started it (not what bash adds for its children).
      const env = (await tsh(f, ["bash", "tr '\\0' '\\n' </proc/$$/environ"])).trim().split("\n")
        .map((l) => l.slice(0, l.indexOf("=")));
      assert(!env.includes("CTX_TOOL_CACHE"), env.join(" "));
      assertEquals(env.filter((k) => !(TSH_ENV as readonly string[]).includes(k)), []);
    } finally {
      await d.stop();
    }
    // A value that is not an integer stops the daemon at start, before it serves anything.
    const bad = await startRuntimeDaemon(f, { env: { CTX_TOOL_CACHE: "many" } }).then(
      (x) => x.stop().then(() => "started"),
      (e: Error) => e.message,
    );
    assertEquals(bad.startsWith("cortexfsd exited 2:"), true, bad);
  } finally {
    await cleanup(f);
  }
});
