import {
  formatGroups,
  formatId,
  formatLabel,
  parseGid,
  parseGroups,
  parseLabel,
  parseOwner,
  parseUid,
} from "./identity.ts";
import { checkTable, type Reject } from "../../tests/table.ts";

const idRejects: Reject[] = [
  ["", "EINVAL", "missing value"],
  ["1000", "EINVAL", "must end with a newline"],
  ["01000\n", "EINVAL", "leading zero"],
  ["+0\n", "EINVAL", "has a sign"],
  ["-1\n", "EINVAL", "has a sign"],
  ["4294967295\n", "EINVAL", "is larger than 4294967294"],
  ["root\n", "EINVAL", "is not a base-10 number"],
  ["1000\n\n", "EINVAL", "extra lines"],
  [" 0\n", "EINVAL", "whitespace"],
  ["0\n1\n", "EINVAL", "extra lines"],
];

Deno.test("owner/uid/gid: accept/reject table (canonical u32 line, 0 allowed)", () => {
  for (
    const [control, parse] of [["owner", parseOwner], ["uid", parseUid], ["gid", parseGid]] as const
  ) {
    checkTable(parse, formatId, {
      control,
      accept: [["0\n", 0], ["1000\n", 1000], ["4294967294\n", 4294967294]],
      reject: idRejects,
    });
  }
});

Deno.test("groups: accept/reject table (one id per line)", () => {
  checkTable(parseGroups, formatGroups, {
    control: "groups",
    accept: [["", []], ["100\n", [100]], ["0\n27\n1000\n", [0, 27, 1000]]],
    reject: [
      ["100", "EINVAL", "must end with a newline"],
      ["100\n\n", "EINVAL", "line 2 is blank"],
      ["\n", "EINVAL", "line 1 is blank"],
      [" 100\n", "EINVAL", "leading or trailing whitespace"],
      ["100\n100\n", "EINVAL", `line 2 repeats "100"`],
      ["100,27\n", "EINVAL", "is not a base-10 number"],
      ["010\n", "EINVAL", "leading zero"],
      ["4294967295\n", "EINVAL", "larger than"],
    ],
  });
});

Deno.test("label: accept/reject table (user:role:type:level, type ends in _t)", () => {
  checkTable(parseLabel, formatLabel, {
    control: "label",
    accept: [
      ["user_u:agent_r:coder_t:s0\n", {
        user: "user_u",
        role: "agent_r",
        type: "coder_t",
        level: "s0",
      }],
      ["system_u:object_r:agent_t:s15\n", {
        user: "system_u",
        role: "object_r",
        type: "agent_t",
        level: "s15",
      }],
    ],
    reject: [
      ["user_u:agent_r:coder_t:s0", "EINVAL", "must end with a newline"],
      ["user_u:agent_r:coder_t\n", "EINVAL", "has 3 fields"],
      ["user_u:agent_r:coder_t:s0:c1\n", "EINVAL", "has 5 fields"],
      ["user_u:agent_r:coder:s0\n", "EINVAL", `type "coder" is not an identifier ending in "_t"`],
      ["user_u:agent_r:_t:s0\n", "EINVAL", `type "_t"`],
      ["user u:agent_r:coder_t:s0\n", "EINVAL", `user "user u" is not an identifier`],
      [":agent_r:coder_t:s0\n", "EINVAL", `user "" is not an identifier`],
      ["user_u:1r:coder_t:s0\n", "EINVAL", `role "1r"`],
      ["user_u:agent_r:coder_t:S0\n", "EINVAL", `level "S0" is not a sensitivity`],
      ["user_u:agent_r:coder_t:s01\n", "EINVAL", `level "s01"`],
      ["user_u:agent_r:coder_t:\n", "EINVAL", `level ""`],
      ["", "EINVAL", "missing value"],
    ],
  });
});
