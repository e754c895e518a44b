/** authorize() against a real initial tree: each rule of the intersection refuses on its own. */
import { assertEquals } from "../../tests/assert.ts";
import { fixture } from "../../tests/tool/fixture.ts";
import { authorize } from "./authorize.ts";
import { allows } from "./rules.ts";
import { letterOf } from "./perm.ts";

Deno.test("authorize() allows a granted built-in and names what it checked", async () => {
  const f = await fixture();
  try {
    const v = authorize({ agent: "coder", tool: "fs.read", root: f.root, uid: 0 });
    if (!v.allow) throw new Error(v.reason);
    assertEquals({ ...v.tool, schema: undefined }, {
      name: "fs.read",
      path: "/ctx/tool/fs.read",
      host: `${f.root}/tool/fs.read`,
      dir: `${f.root}/tool/fs.read.d`,
      builtin: "fs.read",
      letter: "r",
      schema: undefined,
    });
    assertEquals([v.agent.subject, v.network], ["coder_t", false]);
  } finally {
    await f.cleanup();
  }
});

Deno.test("authorize() denies: unknown agent, unknown tool, malformed policy, missing perm", async () => {
  const f = await fixture();
  try {
    const ask = (agent: string, tool: string) => authorize({ agent, tool, root: f.root, uid: 0 });
    assertEquals(ask("nobody", "fs.read"), {
      allow: false,
      errno: "ENOENT",
      reason: `${f.root}/agent/nobody.d: agent "nobody" does not exist`,
    });
    assertEquals(ask("coder", "nope").allow ? "" : ask("coder", "nope"), {
      allow: false,
      errno: "ENOENT",
      reason: 'tool "nope" not found in CTX_PATH /ctx/tool:/ctx/home/0/tool',
    });
    f.set("policy", "allow coder_t file:x read\n");
    const bad = ask("coder", "fs.read");
    assertEquals(bad.allow ? "" : bad.errno, "EINVAL");
    f.set("policy", "allow coder_t tool:fs.read execute\n");
    Deno.removeSync(`${f.root}/agent/coder.d/perm`);
    const noPerm = ask("coder", "fs.read");
    assertEquals(noPerm.allow ? "" : noPerm.errno, "EACCES");
  } finally {
    await f.cleanup();
  }
});

Deno.test("policy v0 matches exactly: no globs, no prefix matches", () => {
  const rules = [{
    subject: "coder_t",
    class: "tool" as const,
    object: "fs.read",
    permission: "execute",
  }];
  const ask = { subject: "coder_t", cls: "tool" as const, permission: "execute" };
  assertEquals(allows(rules, { ...ask, object: "fs.read" }), true);
  assertEquals(allows(rules, { ...ask, object: "fs.rea" }), false);
  assertEquals(allows(rules, { ...ask, object: "fs.read", subject: "agent_t" }), false);
  assertEquals(allows([{ ...rules[0], object: "*" }], { ...ask, object: "fs.read" }), false);
});

Deno.test("letterOf(): built-ins by name, everything else consumes x", () => {
  assertEquals(
    [
      letterOf({ name: "fs.read", builtin: "fs.read" }),
      letterOf({ name: "fs.write", builtin: "fs.write" }),
      letterOf({ name: "bash", builtin: "bash" }),
      letterOf({ name: "fs.read" }), // an executable merely named like a built-in
      letterOf({ name: "alias", builtin: "fs.read" }), // metadata naming another built-in
    ],
    ["r", "w", "x", "x", "x"],
  );
});
