import {
  formatEnv,
  formatPath,
  formatToolPath,
  parseCwd,
  parseEnv,
  parseRoot,
  parseToolPath,
} from "./view.ts";
import { checkTable } from "../../tests/table.ts";

Deno.test("root/cwd: accept/reject table (one canonical absolute path line)", () => {
  for (const [control, parse] of [["root", parseRoot], ["cwd", parseCwd]] as const) {
    checkTable(parse, formatPath, {
      control,
      accept: [["/\n", "/"], ["/workspace\n", "/workspace"], [
        "/ctx/home/1000/agent/a b\n",
        "/ctx/home/1000/agent/a b",
      ]],
      reject: [
        ["workspace\n", "EINVAL", `"workspace" is not an absolute path`],
        ["/workspace", "EINVAL", "must end with a newline"],
        ["/workspace\n\n", "EINVAL", "extra lines"],
        ["/a/../b\n", "EINVAL", `has a ".." component`],
        ["/a/./b\n", "EINVAL", `has a "." component`],
        ["/a//b\n", "EINVAL", "empty component"],
        ["/a/\n", "EINVAL", `ends with "/"`],
        ["/a\tb\n", "EINVAL", "control character"],
        ["~/x\n", "EINVAL", "not an absolute path"],
        ["$HOME\n", "EINVAL", "not an absolute path"],
        ["", "EINVAL", "missing value"],
        ["/" + "a".repeat(5000) + "\n", "EINVAL", "longer than 4096 bytes"],
      ],
    });
  }
});

Deno.test("path: accept/reject table (one absolute tool dir per line)", () => {
  checkTable(parseToolPath, formatToolPath, {
    control: "path",
    accept: [
      ["", []],
      ["/ctx/tool\n", ["/ctx/tool"]],
      ["/ctx/tool\n/ctx/home/1000/tool\n", ["/ctx/tool", "/ctx/home/1000/tool"]],
    ],
    reject: [
      ["/ctx/tool", "EINVAL", "must end with a newline"],
      ["/ctx/tool\n\n", "EINVAL", "line 2 is blank"],
      ["/ctx/tool:/usr/bin\n", "EINVAL", `contains ":"`],
      ["tool\n", "EINVAL", "not an absolute path"],
      [" /ctx/tool\n", "EINVAL", "leading or trailing whitespace"],
      ["/ctx/tool\n/ctx/tool\n", "EINVAL", "line 2 repeats"],
      ["/ctx/../etc\n", "EINVAL", `".." component`],
    ],
  });
});

Deno.test("env: accept/reject table (KEY=VALUE, literal, no expansion)", () => {
  checkTable(parseEnv, formatEnv, {
    control: "env",
    accept: [
      ["", {}],
      ["LANG=C.UTF-8\n", { LANG: "C.UTF-8" }],
      ["A=\n_B2=x=y\n", { A: "", _B2: "x=y" }],
      ["P=$HOME/bin:${X}\n", { P: "$HOME/bin:${X}" }],
      ["Q= spaced \tvalue\n", { Q: " spaced \tvalue" }],
    ],
    reject: [
      ["A=1", "EINVAL", "must end with a newline"],
      ["A\n", "EINVAL", `line 1 "A" is not KEY=VALUE`],
      ["=1\n", "EINVAL", `key "" is not`],
      ["1A=x\n", "EINVAL", `key "1A" is not`],
      ["A-B=x\n", "EINVAL", `key "A-B" is not`],
      ["export A=1\n", "EINVAL", `key "export A" is not`],
      ["A=1\nA=2\n", "EINVAL", `line 2 repeats key "A"`],
      ["CTX_ROOT=/x\n", "EINVAL", "runtime-owned"],
      ["A=1\n\nB=2\n", "EINVAL", "line 2 is blank"],
      ["A=\x1b[31m\n", "EINVAL", "control character"],
      [" A=1\n", "EINVAL", "leading or trailing whitespace"],
    ],
  });
});
