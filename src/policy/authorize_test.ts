/** decide(): the authority decision from facts alone, no tree. */
import { assertEquals } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import type { AgentDef, ToolDef } from "../store/agent.ts";
import { decide, type Facts } from "./authorize.ts";
import { allows } from "./rules.ts";
import { letterOf } from "./perm.ts";

const grant = (subject: string, object: string) => ({
  subject,
  class: "tool" as const,
  object,
  permission: "execute",
});

function facts(over: Partial<Facts> = {}, agent: Partial<AgentDef> = {}): Facts {
  return {
    tool: "fs.read",
    agent: {
      name: "coder",
      uid: 1000,
      gid: 1000,
      groups: [],
      subject: "coder_t",
      perm: { r: true, w: false, x: false },
      policy: [grant("coder_t", "fs.read")],
      ...agent,
    } as AgentDef, // decide() reads only these fields
    ctxPath: ["/ctx/tool"],
    hit: { path: "/ctx/tool/fs.read", host: "/t/tool/fs.read", dir: "/t/tool/fs.read.d" },
    opened: { mode: 0o755, uid: 0, gid: 0, dev: 1, ino: 2 },
    builtin: "fs.read",
    controls: {
      policy: [grant("coder_t", "fs.read")],
      schema: { type: "object" },
    } as unknown as ToolDef,
    ...over,
  };
}

Deno.test("decide() allows when every check passes and names what it checked", () => {
  const v = decide(facts());
  assertEquals(v.allow, true);
  if (v.allow) {
    assertEquals([v.tool.letter, v.tool.builtin, v.tool.ino, v.network], [
      "r",
      "fs.read",
      2,
      false,
    ]);
  }
});

Deno.test("decide() denies in order, each check on its own", () => {
  const why = (f: Facts) => {
    const v = decide(f);
    return v.allow ? "allow" : `${v.errno} ${v.reason}`;
  };
  assertEquals(
    why(facts({ hit: null, opened: undefined })).startsWith('ENOENT tool "fs.read"'),
    true,
  );
  assertEquals(
    why(facts({ opened: { mode: 0o700, uid: 0, gid: 0, dev: 1, ino: 2 } })).includes("mode 700"),
    true,
  );
  assertEquals(
    why(facts({}, { perm: { r: false, w: true, x: true } })).includes('lacks "r"'),
    true,
  );
  // an executable that merely calls itself fs.read is not the built-in: it needs x
  assertEquals(why(facts({ builtin: undefined })).includes('lacks "x"'), true);
  assertEquals(why(facts({}, { policy: [] })).includes("agent policy"), true);
  assertEquals(
    why(facts({ controls: new CtxError("EACCES", "incomplete", { path: "/t/tool/fs.read.d" }) })),
    "EACCES /t/tool/fs.read.d: incomplete",
  );
  // the agent policy is weighed before the tool's controls: its denial wins
  assertEquals(
    why(facts({ controls: new CtxError("EINVAL", "bad policy") }, { policy: [] })).includes(
      "agent policy",
    ),
    true,
  );
  assertEquals(
    why(facts({ controls: { policy: [] } as unknown as ToolDef })).includes("tool policy"),
    true,
  );
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
