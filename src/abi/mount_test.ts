import { formatMount, parseMount } from "./mount.ts";
import { checkTable } from "../../tests/table.ts";

Deno.test("mount: accept/reject table (source TAB target TAB mode TAB options)", () => {
  checkTable(parseMount, formatMount, {
    control: "mount",
    accept: [
      ["", []],
      ["/ctx\t/ctx\tro\trbind,nosuid,nodev\n", [{
        source: "/ctx",
        target: "/ctx",
        mode: "ro",
        options: ["rbind", "nosuid", "nodev"],
      }]],
      ["/src\t/workspace\trw\t-\n/src/.git\t/workspace/.git\tro\tbind,noexec\n", [
        { source: "/src", target: "/workspace", mode: "rw", options: [] },
        { source: "/src/.git", target: "/workspace/.git", mode: "ro", options: ["bind", "noexec"] },
      ]],
    ],
    reject: [
      ["/a\t/b\tro\t-", "EINVAL", "must end with a newline"],
      ["/a /b ro -\n", "EINVAL", "has 1 tab-separated fields"],
      ["/a\t/b\tro\n", "EINVAL", "has 3 tab-separated fields"],
      ["/a\t/b\tro\t-\textra\n", "EINVAL", "has 5 tab-separated fields"],
      ["a\t/b\tro\t-\n", "EINVAL", `"a" is not an absolute path`],
      ["/a\tb\tro\t-\n", "EINVAL", `"b" is not an absolute path`],
      ["/a\t/b/../c\tro\t-\n", "EINVAL", `".." component`],
      ["/a\t/b\trx\t-\n", "EINVAL", `mode "rx" is not ro or rw`],
      ["/a\t/b\tRO\t-\n", "EINVAL", `mode "RO"`],
      ["/a\t/b\tro\t\n", "EINVAL", "leading or trailing whitespace"],
      ["/a\t/b\tro\tbind,\n", "EINVAL", `option "" is not one of`],
      [
        "/a\t/b\tro\tsuid\n",
        "EINVAL",
        `option "suid" is not one of bind rbind nosuid nodev noexec`,
      ],
      ["/a\t/b\tro\t-,bind\n", "EINVAL", `option "-" is not one of`],
      ["/a\t/b\tro\tnodev,nodev\n", "EINVAL", `option "nodev" is repeated`],
      ["/a\t/b\tro\tbind,rbind\n", "EINVAL", `"bind" and "rbind" are exclusive`],
      ["/a\t/b\tro\t-\n/c\t/b\trw\t-\n", "EINVAL", `line 2: target "/b" repeats`],
      ["/a\t/b\tro\t-\n\n", "EINVAL", "line 2 is blank"],
    ],
  });
});
