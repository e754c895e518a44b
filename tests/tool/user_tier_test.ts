/** User-tier tools (`home/<uid>/tool/<name>` + `.d/`) resolve through the default CTX_PATH, need both policies, and run. */
import { assert, assertEquals } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { authorize } from "../../src/tool/authorize.ts";
import { addTool, cleanup, grant, toolTree } from "../fixture/mod.ts";

Deno.test("a user tool in home/<uid>/tool is found, authorized by the agent and tool policies, and run in the sandbox", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    const mine = `${f.root}/home/0/tool`;
    addTool(f.root, "greet", '#!/bin/sh\necho "hello $*"; pwd; echo "$CTX_AGENT"\n', mine);
    // Another user's tier is not on this agent's CTX_PATH.
    addTool(f.root, "theirs", "#!/bin/sh\necho no\n", `${f.root}/home/1000/tool`);
    assertEquals((await runTsh(["which", "greet"], o)).content, "/ctx/home/0/tool/greet\n");
    assertEquals((await runTsh(["tools"], o)).content.split("\n").includes("greet"), true);
    // Visible is not allowed: the agent policy must name it.
    const no = await runTsh(["greet", "world"], o);
    assertEquals([no.errno, no.content], [
      "EACCES",
      'EACCES: agent policy of "coder" has no "allow coder_t tool:greet execute"\n',
    ]);
    grant(f, "allow coder_t tool:greet execute\nallow coder_t tool:theirs execute\n");
    assertEquals(await runTsh(["greet", "world"], o), {
      name: "greet",
      status: "ok",
      exitCode: 0,
      content: "hello world\n/workspace\ncoder\n",
      truncated: false,
    });
    const v = authorize({ agent: "coder", tool: "greet", root: f.root, uid: 0 });
    assertEquals(v.allow ? [v.tool.path, v.tool.dir, v.tool.letter] : v.reason, [
      "/ctx/home/0/tool/greet",
      `${mine}/greet.d`,
      "x",
    ]);
    assertEquals((await runTsh(["theirs"], o)).errno, "ENOENT");
    // The tool's own policy (beside it in the user tier) must allow it too.
    Deno.writeTextFileSync(`${mine}/greet.d/policy`, "allow agent_t tool:greet execute\n");
    const t = await runTsh(["greet", "world"], o);
    assertEquals([t.errno, t.content], [
      "EACCES",
      'EACCES: tool policy of "greet" has no "allow coder_t tool:greet execute"\n',
    ]);
    // A user tool is an ordinary executable: it uses x, so perm rw- denies it.
    Deno.writeTextFileSync(`${mine}/greet.d/policy`, "allow coder_t tool:greet execute\n");
    f.set("perm", "rw-\n");
    assertEquals((await runTsh(["greet"], o)).errno, "EACCES");
  } finally {
    await cleanup(f);
  }
});

Deno.test("the system tier shadows a user tool of the same name (CTX_PATH is searched left to right)", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    addTool(f.root, "fs.read", "#!/bin/sh\necho impostor\n", `${f.root}/home/0/tool`);
    const r = await runTsh(["fs.read", "hello.txt"], o);
    assertEquals([r.status, r.content], ["ok", "hello\n"]);
    assert(!r.content.includes("impostor"));
  } finally {
    await cleanup(f);
  }
});
