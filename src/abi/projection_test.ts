import {
  formatLog,
  formatPid,
  formatStatus,
  parseLog,
  parsePid,
  parseStatus,
} from "./projection.ts";
import { checkTable } from "../../tests/table.ts";

Deno.test("status: accept/reject table (lifecycle words)", () => {
  checkTable(parseStatus, formatStatus, {
    control: "status",
    accept: [["dead\n", "dead"], ["ready\n", "ready"], ["busy\n", "busy"]],
    reject: [
      ["dead", "EINVAL", "must end with a newline"],
      ["running\n", "EINVAL", `"running" is not one of start, ready, busy, idle, stopping, dead`],
      ["", "EINVAL", "missing value"],
    ],
  });
});

Deno.test("pid: accept/reject table (a pid line, or empty when not running)", () => {
  checkTable(parsePid, formatPid, {
    control: "pid",
    accept: [["", null], ["1\n", 1], ["4194304\n", 4194304]],
    reject: [
      ["0\n", "EINVAL", "is zero"],
      ["12", "EINVAL", "must end with a newline"],
      ["\n", "EINVAL", "missing value"],
      ["4194305\n", "EINVAL", "larger than 4194304"],
      ["012\n", "EINVAL", "leading zero"],
    ],
  });
});

Deno.test("log: accept/reject table (whole lines)", () => {
  checkTable(parseLog, formatLog, {
    control: "log",
    accept: [["", ""], ["agent.start\nagent.stop\n", "agent.start\nagent.stop\n"]],
    reject: [["agent.start", "EINVAL", "must end with a newline"], ["\0\n", "EINVAL", "NUL"]],
  });
});
