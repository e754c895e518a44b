/** tsh load/pin capacity from tool/tsh.d/config and CTX_TOOL_CACHE, for real; eviction never touches authority. */
import { assertEquals, assertStringIncludes } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { authorize } from "../../src/tool/authorize.ts";
import { BUILTIN_TOOLS } from "../../src/abi/builtin.ts";
import { cleanup, toolTree } from "../fixture/mod.ts";

/** Every file under `dir`, path -> bytes as text. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of Deno.readDirSync(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) walk(p);
      else out[p] = e.isSymlink ? `-> ${Deno.readLinkSync(p)}` : Deno.readTextFileSync(p);
    }
  };
  walk(dir);
  return out;
}

Deno.test("tool/tsh.d/config bounds load/pin, CTX_TOOL_CACHE overrides it; eviction leaves every authority control as it was", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    // The tree already has the file (migration 2 tsh-config); the operator tightens it.
    Deno.writeTextFileSync(`${f.root}/tool/tsh.d/config`, "# small\ncache_capacity=2\n");
    f.set("tools", "fs.read\n"); // the static direct-native set
    const controls = () => ({
      agent: snapshot(`${f.root}/agent`),
      tool: snapshot(`${f.root}/tool`),
    });
    const verdicts = () =>
      BUILTIN_TOOLS.map((t) => authorize({ agent: "coder", tool: t.name, root: f.root, uid: 0 }));
    const before = { controls: controls(), verdicts: verdicts() };
    const say = async (args: string[], extra: { toolCache?: string } = {}) =>
      (await runTsh(args, { ...o, ...extra })).content;
    assertEquals(
      [
        await say(["load", "fs.read"]),
        await say(["load", "fs.list"]),
        await say(["pin", "bash"]),
        await say(["load", "fs.stat"]),
        await say(["loads"]),
      ],
      [
        "loaded fs.read\n",
        "loaded fs.list\n",
        "pinned bash (evicted fs.read)\n",
        "loaded fs.stat (evicted fs.list)\n",
        "bash *\nfs.stat\n",
      ],
    );
    // CTX_TOOL_CACHE (clamped: 0 -> 1) wins over the config; the pin survives any capacity.
    assertEquals(
      await say(["load", "fs.write"], { toolCache: "0" }),
      "loaded fs.write (evicted fs.stat)\n",
    );
    assertEquals(await say(["loads"]), "bash *\nfs.write\n");
    const bad = await runTsh(["load", "fs.read"], { ...o, toolCache: "many" });
    assertEquals([bad.errno, bad.content], [
      "EINVAL",
      'EINVAL: CTX_TOOL_CACHE="many" is not an integer\n',
    ]);
    // The state holds metadata only.
    const state = JSON.parse(Deno.readTextFileSync(`${f.root}/home/0/agent/coder/.tsh/state.json`));
    assertEquals(
      state.loaded.map((l: Record<string, unknown>) => Object.keys(l).sort()),
      [["description", "name", "path", "pinned", "used"], [
        "description",
        "name",
        "path",
        "pinned",
        "used",
      ]],
    );
    // Nothing under agent/ or tool/ changed (tsh.d/config included), and no decision changed.
    assertEquals({ controls: controls(), verdicts: verdicts() }, before);
    // A pin is not a grant: with perm r-- the pinned bash is still denied and runs nothing.
    f.set("perm", "r--\n");
    const denied = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals([denied.errno, denied.exitCode], ["EACCES", 13]);
    // A malformed config is a clear error for load, and the state is left as it was.
    Deno.writeTextFileSync(`${f.root}/tool/tsh.d/config`, "cache_capacity=lots\n");
    const broken = await runTsh(["load", "fs.list"], o);
    assertEquals(broken.errno, "EINVAL");
    assertStringIncludes(broken.content, '"tool/tsh.d/config": line 1: cache_capacity="lots"');
    assertEquals(await say(["loads"]), "bash *\nfs.write\n");
  } finally {
    await cleanup(f);
  }
});
