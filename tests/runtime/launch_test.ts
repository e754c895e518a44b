/** How an executable agent is started: nothing of root's reaches it, and root runs nothing of the agent's. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import {
  addTestAgent,
  cleanup,
  ctx,
  makeTree,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

const root = Deno.uid() === 0;

/** Makes `name` run as uid/gid 1000 (its program and logs reachable by that uid). */
function asUser1000(f: Tree, name: string, env = {}) {
  Deno.chmodSync(f.dir, 0o755);
  Deno.chmodSync(f.logs, 0o777);
  addTestAgent(f, name, { env });
  replaceFile(`${f.root}/agent/${name}.d/uid`, "1000\n");
  replaceFile(`${f.root}/agent/${name}.d/gid`, "1000\n");
}

Deno.test({
  name:
    "an LD_PRELOAD in the agent's env control loads only into the agent, never into a root process",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    // In the log dir: the one host directory bound into the agent's sandbox.
    const lib = `${f.logs}/probe.so`, log = `${f.logs}/preload.log`;
    // The probe records the uid of every process that loads it.
    const src = `${f.dir}/probe.c`;
    Deno.writeTextFileSync(
      src,
      `#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n` +
        `__attribute__((constructor)) static void probe(void) {\n` +
        `  const char *p = getenv("PROBE_LOG"); if (!p) return;\n` +
        `  FILE *f = fopen(p, "a"); if (f) { fprintf(f, "%d\\n", (int)getuid()); fclose(f); }\n}\n`,
    );
    const cc = await new Deno.Command("gcc", { args: ["-shared", "-fPIC", "-o", lib, src] })
      .output();
    assert(cc.success, new TextDecoder().decode(cc.stderr));
    Deno.chmodSync(lib, 0o755);
    asUser1000(f, "pre", { LD_PRELOAD: lib, PROBE_LOG: log });
    const d = await startRuntimeDaemon(f);
    try {
      const out = await ctx(f, ["agent", "send", "pre", "echo hi"]);
      assertEquals(out.code, 0, out.stderr);
      const uids = new Set(Deno.readTextFileSync(log).trim().split("\n"));
      // The agent (and what it runs) loaded the probe as itself; setsid/setpriv (root) did not.
      assertEquals([...uids], ["1000"]);
    } finally {
      await d.stop();
      await cleanup(f);
    }
  },
});

Deno.test("an fd the daemon inherited without close-on-exec never reaches an agent process", async () => {
  const f = await makeTree();
  const marker = `${f.dir}/inherited-marker`;
  Deno.writeTextFileSync(marker, "x\n");
  addTestAgent(f, "fds");
  // The daemon starts with fd 7 open on the marker (no close-on-exec), as a careless parent leaves it.
  const d = await startRuntimeDaemon(f, { wrap: ["bash", "-c", 'exec 7<"$0"; exec "$@"', marker] });
  try {
    const out = await ctx(f, ["agent", "send", "fds", "fds"]);
    assertEquals(out.code, 0, out.stderr);
    assert(out.stdout.includes("pipe:"), out.stdout); // it did list its fds
    assertEquals(out.stdout.includes(marker), false, out.stdout);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test({
  name:
    "the workspace is entered as the agent: root's private cwd is refused, an open one is bound at /workspace",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    asUser1000(f, "w");
    const priv = `${f.dir}/private`, open = `${f.dir}/open`;
    Deno.mkdirSync(priv, { mode: 0o700 });
    Deno.chmodSync(priv, 0o700);
    Deno.writeTextFileSync(`${priv}/secret`, "ROOTSECRET\n");
    Deno.mkdirSync(open, { mode: 0o755 });
    Deno.chmodSync(open, 0o755);
    const d = await startRuntimeDaemon(f);
    try {
      const refused = await ctx(f, ["agent", "send", "w", "pwd"], { cwd: priv });
      assert(refused.code !== 0, refused.stdout);
      assertEquals(refused.stdout.includes(priv), false);
      Deno.writeTextFileSync(`${open}/mark`, "here\n");
      const ok = await ctx(f, ["agent", "send", "w", "pwd"], { cwd: open });
      assertEquals({ code: ok.code, out: ok.stdout.trim() }, { code: 0, out: "/workspace" });
      const seen = await ctx(f, ["agent", "send", "w", "canread /workspace/mark"], { cwd: open });
      assertEquals(seen.stdout.trim(), "yes");
    } finally {
      await d.stop();
      await cleanup(f);
    }
  },
});
