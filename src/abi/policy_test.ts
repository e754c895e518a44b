import { formatPolicy, parsePolicy, POLICY_CLASSES, type PolicyRule } from "./policy.ts";
import { checkTable } from "../../tests/table.ts";
import { assertEquals } from "../../tests/assert.ts";

const rule = (subject: string, cls: PolicyRule["class"], object: string, permission: string) => ({
  subject,
  class: cls,
  object,
  permission,
});

Deno.test("policy: accept/reject table (policy v0)", () => {
  checkTable(parsePolicy, formatPolicy, {
    control: "policy",
    accept: [
      ["", []],
      ["allow coder_t tool:fs.read execute\n", [rule("coder_t", "tool", "fs.read", "execute")]],
      [
        "# the default agent\n\nallow coder_t model:debug/echo use\nallow coder_t network:default connect\n",
        [
          rule("coder_t", "model", "debug/echo", "use"),
          rule("coder_t", "network", "default", "connect"),
        ],
        "allow coder_t model:debug/echo use\nallow coder_t network:default connect\n",
      ],
      [
        "allow a_t model:main use\nallow a_t shared:team write\nallow a_t session:default resume\n" +
        "allow a_t mount:/workspace read\nallow a_t agent:helper create\n",
        [
          rule("a_t", "model", "main", "use"),
          rule("a_t", "shared", "team", "write"),
          rule("a_t", "session", "default", "resume"),
          rule("a_t", "mount", "/workspace", "read"),
          rule("a_t", "agent", "helper", "create"),
        ],
      ],
    ],
    reject: [
      ["allow coder_t tool:fs.read execute", "EINVAL", "must end with a newline"],
      ["deny coder_t tool:fs.read execute\n", "EINVAL", `verb "deny" is not "allow"`],
      ["allow coder_t tool:fs.read\n", "EINVAL", 'is not "allow <subject_type>'],
      ["allow coder_t tool:fs.read execute now\n", "EINVAL", 'is not "allow <subject_type>'],
      ["allow  coder_t tool:fs.read execute\n", "EINVAL", 'is not "allow <subject_type>'],
      ["allow\tcoder_t tool:fs.read execute\n", "EINVAL", 'is not "allow <subject_type>'],
      [" allow coder_t tool:fs.read execute\n", "EINVAL", "leading or trailing whitespace"],
      ["  # indented comment\n", "EINVAL", "leading or trailing whitespace"],
      [
        "allow coder tool:fs.read execute\n",
        "EINVAL",
        `subject "coder" is not a type ending in "_t"`,
      ],
      ["allow coder_t fs.read execute\n", "EINVAL", `"fs.read" is not <class>:<object>`],
      ["allow coder_t file:/etc read\n", "EINVAL", `class "file" is unknown`],
      [
        "allow coder_t tool:fs.read run\n",
        "EINVAL",
        `permission "run" is not a tool permission (execute)`,
      ],
      [
        "allow coder_t model:debug/echo execute\n",
        "EINVAL",
        `permission "execute" is not a model permission (use)`,
      ],
      ["allow coder_t tool:* execute\n", "EINVAL", `tool object "*"`],
      ["allow coder_t tool:fs.* execute\n", "EINVAL", `tool object "fs.*" contains "*"`],
      ["allow coder_t tool: execute\n", "EINVAL", `tool object "" is empty`],
      ["allow coder_t network:internet connect\n", "EINVAL", `is not "default"`],
      ["allow coder_t model:a/b/c use\n", "EINVAL", "has more than two components"],
      ["allow coder_t mount:/a/../b read\n", "EINVAL", "not a canonical absolute path"],
      [
        "allow coder_t agent:helper execute\n",
        "EINVAL",
        "is not a agent permission (create, start, stop, read, write)",
      ],
    ],
  });
});

Deno.test("POLICY_CLASSES is the fixed v0 table", () => {
  assertEquals(POLICY_CLASSES, {
    tool: ["execute"],
    model: ["use"],
    shared: ["read", "write"],
    session: ["read", "write", "resume"],
    mount: ["read", "write"],
    agent: ["create", "start", "stop", "read", "write"],
    network: ["connect"],
  });
});
