import {
  type Effort,
  EFFORTS,
  formatAbi,
  formatApproval,
  formatEffort,
  formatPerm,
  formatSession,
  parseAbi,
  parseApproval,
  parseEffort,
  parsePerm,
  parseSession,
} from "./choice.ts";
import { checkTable, type Reject } from "../../tests/table.ts";

const lineRejects = (word: string): Reject[] => [
  [word, "EINVAL", "must end with a newline"],
  [`${word}\n\n`, "EINVAL", "extra lines"],
  [` ${word}\n`, "EINVAL", "is not one of"],
  [`${word.toUpperCase()}\n`, "EINVAL", "is not one of"],
  ["", "EINVAL", "missing value"],
];

Deno.test("perm: accept/reject table (the eight r/w/x triplets)", () => {
  const all = ["---", "--x", "-w-", "-wx", "r--", "r-x", "rw-", "rwx"];
  checkTable(parsePerm, formatPerm, {
    control: "perm",
    accept: all.map((p) => [`${p}\n`, { r: p[0] === "r", w: p[1] === "w", x: p[2] === "x" }]),
    reject: [
      ["rwx", "EINVAL", "must end with a newline"],
      ["wrx\n", "EINVAL", `"wrx" is not a triplet`],
      ["rw\n", "EINVAL", `"rw" is not a triplet`],
      ["rwxr\n", "EINVAL", "is not a triplet"],
      ["RWX\n", "EINVAL", "is not a triplet"],
      ["r-?\n", "EINVAL", "is not a triplet"],
      ["755\n", "EINVAL", "is not a triplet"],
      ["rwx\n\n", "EINVAL", "extra lines"],
    ],
  });
});

Deno.test("abi: accept/reject table (only sdk-envelope-v1)", () => {
  checkTable(parseAbi, formatAbi, {
    control: "abi",
    accept: [["sdk-envelope-v1\n", "sdk-envelope-v1"]],
    reject: [
      ...lineRejects("sdk-envelope-v1"),
      ["argv-v1\n", "EINVAL", `"argv-v1" is not one of sdk-envelope-v1`],
      ["sdk-envelope-v2\n", "EINVAL", "is not one of"],
    ],
  });
});

Deno.test("approval: accept/reject table (auto|ask)", () => {
  checkTable(parseApproval, formatApproval, {
    control: "approval",
    accept: [["auto\n", "auto"], ["ask\n", "ask"]],
    reject: [...lineRejects("ask"), ["deny\n", "EINVAL", `"deny" is not one of auto, ask`]],
  });
});

Deno.test("session: accept/reject table (none|socket)", () => {
  checkTable(parseSession, formatSession, {
    control: "session",
    accept: [["none\n", "none"], ["socket\n", "socket"]],
    reject: [...lineRejects("none"), ["thread\n", "EINVAL", "is not one of none, socket"]],
  });
});

Deno.test("effort: accept/reject table (auto|low|medium|high|xhigh)", () => {
  checkTable(parseEffort, formatEffort, {
    control: "effort",
    accept: EFFORTS.map((w): [string, Effort] => [`${w}\n`, w]),
    reject: [...lineRejects("high"), [
      "max\n",
      "EINVAL",
      "is not one of auto, low, medium, high, xhigh",
    ]],
  });
});
