/** authorize() against a real initial tree: each rule of the intersection refuses on its own. */
import { assertEquals } from "../../tests/assert.ts";
import { cleanup, toolTree } from "../../tests/fixture/mod.ts";
import { authorize } from "./authorize.ts";

Deno.test("authorize() allows a granted built-in and names what it checked", async () => {
  const f = await toolTree();
  try {
    const v = authorize({ agent: "coder", tool: "fs.read", root: f.root, uid: 0 });
    if (!v.allow) throw new Error(v.reason);
    const st = Deno.lstatSync(`${f.root}/tool/fs.read`);
    assertEquals({ ...v.tool, schema: undefined }, {
      name: "fs.read",
      path: "/ctx/tool/fs.read",
      host: `${f.root}/tool/fs.read`,
      dir: `${f.root}/tool/fs.read.d`,
      builtin: "fs.read",
      letter: "r",
      schema: undefined,
      dev: st.dev,
      ino: st.ino,
    });
    assertEquals([v.agent.subject, v.network], ["coder_t", false]);
  } finally {
    await cleanup(f);
  }
});

Deno.test("authorize() denies: unknown agent, unknown tool, malformed policy, missing perm", async () => {
  const f = await toolTree();
  try {
    const ask = (agent: string, tool: string) => authorize({ agent, tool, root: f.root, uid: 0 });
    assertEquals(ask("nobody", "fs.read"), {
      allow: false,
      errno: "ENOENT",
      reason: 'agent/nobody.d: no agent "nobody"',
    });
    assertEquals(ask("coder", "nope"), {
      allow: false,
      errno: "ENOENT",
      reason: 'tool "nope" not found in CTX_PATH /ctx/tool:/ctx/home/0/tool',
    });
    f.set("policy", "allow coder_t file:x read\n");
    const bad = ask("coder", "fs.read");
    assertEquals(bad.allow ? "" : bad.errno, "EINVAL");
    f.set("policy", "allow coder_t tool:fs.read execute\n");
    Deno.removeSync(`${f.root}/agent/coder.d/perm`);
    assertEquals(ask("coder", "fs.read"), {
      allow: false,
      errno: "EACCES",
      reason:
        `${f.root}/agent/coder.d/perm: agent "coder" is incomplete, authority fails closed: ` +
        `required control "perm" is missing`,
    });
  } finally {
    await cleanup(f);
  }
});

Deno.test("authorize() parses through the store loaders: every agent and tool control is checked, aliases resolve", async () => {
  const f = await toolTree();
  try {
    const ask = (agent = "coder") => authorize({ agent, tool: "fs.read", root: f.root, uid: 0 });
    // Controls the old private reader never looked at are parsed too: a bad one denies.
    f.set("tools", "fs.read\nfs.read\n");
    const dup = ask();
    assertEquals(dup.allow ? "" : dup.errno, "EINVAL");
    f.set("tools", "");
    // An agent alias is the agent it names (loadAgent resolves it).
    Deno.symlinkSync("coder", `${f.root}/agent/main`);
    const viaAlias = ask("main");
    assertEquals(viaAlias.allow ? viaAlias.agent.name : viaAlias.reason, "coder");
    // The tool's .d/ is loaded whole: a missing required control denies, fail closed.
    Deno.removeSync(`${f.root}/tool/fs.read.d/cap`);
    assertEquals(ask(), {
      allow: false,
      errno: "EACCES",
      reason: `${f.root}/tool/fs.read.d/cap: tool "fs.read" is incomplete, authority fails ` +
        `closed: required control "cap" is missing`,
    });
    // Its name control must name it.
    Deno.writeTextFileSync(`${f.root}/tool/fs.read.d/cap`, "");
    Deno.writeTextFileSync(`${f.root}/tool/fs.read.d/name`, "fs.list\n");
    const named = ask();
    assertEquals(named.allow ? "" : named.errno, "EINVAL");
  } finally {
    await cleanup(f);
  }
});
