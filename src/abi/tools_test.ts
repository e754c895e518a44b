import {
  formatToolCap,
  formatToolName,
  formatTools,
  parseToolCap,
  parseToolName,
  parseTools,
} from "./tools.ts";
import { checkTable } from "../../tests/table.ts";

Deno.test("tools: accept/reject table (one canonical name per line, no tsh, no repeats)", () => {
  checkTable(parseTools, formatTools, {
    control: "tools",
    accept: [["", []], ["fs.read\n", ["fs.read"]], ["fs.read\nbash\n", ["fs.read", "bash"]]],
    reject: [
      ["fs.read", "EINVAL", `last line "fs.read" must end with a newline`],
      ["fs.read\n\n", "EINVAL", "line 2 is blank"],
      ["\n", "EINVAL", "line 1 is blank"],
      [" fs.read\n", "EINVAL", "leading or trailing whitespace"],
      ["fs.read \n", "EINVAL", "leading or trailing whitespace"],
      ["fs.read\nfs.read\n", "EINVAL", `line 2 repeats "fs.read"`],
      ["tsh\n", "EINVAL", `"tsh" is always native`],
      ["a/b\n", "EINVAL", `tool name "a/b" contains "/"`],
      ["..\n", "EINVAL", "is reserved"],
      ["x.sock\n", "EINVAL", 'ends with ".sock"'],
      ["fs.read,bash\n", "EINVAL", `contains ","`],
      ["fs.read\r\n", "EINVAL", "carriage return"],
    ],
  });
});

Deno.test("tool name: accept/reject table", () => {
  checkTable(parseToolName, formatToolName, {
    control: "name",
    accept: [["fs.read\n", "fs.read"], ["tsh\n", "tsh"]],
    reject: [
      ["fs.read", "EINVAL", "must end with a newline"],
      ["fs read\n", "EINVAL", "contains whitespace"],
      ["a/b\n", "EINVAL", `contains "/"`],
      ["", "EINVAL", "missing value"],
    ],
  });
});

Deno.test("tool cap: accept/reject table (words, one per line)", () => {
  checkTable(parseToolCap, formatToolCap, {
    control: "cap",
    accept: [["", []], ["read\n", ["read"]], ["read\nnet_io\n", ["read", "net_io"]]],
    reject: [
      ["read", "EINVAL", "must end with a newline"],
      ["Read\n", "EINVAL", `"Read" is not a word`],
      ["read write\n", "EINVAL", "is not a word"],
      ["read\nread\n", "EINVAL", "repeats"],
      ["\n", "EINVAL", "blank"],
    ],
  });
});
