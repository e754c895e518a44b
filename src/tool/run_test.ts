/** runTsh's reading of tsh's tool_result frame (written inside the sandbox, so parsed). */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { toolResultOf } from "./run.ts";

const good: Record<string, unknown> = {
  type: "tool_result",
  name: "fs.read",
  status: "error",
  errno: "ENOENT",
  exitCode: 2,
  content: "x\n",
  truncated: false,
};

Deno.test("toolResultOf() takes a tool_result frame of the spec's shape, without its type", () => {
  const { type: _, ...r } = good;
  assertEquals<unknown>(toolResultOf(good), r);
});

Deno.test("toolResultOf() refuses a tool_result frame off the spec's shape: EIO", () => {
  const bad: [Record<string, unknown>, string][] = [
    [{ ...good, status: "allowed" }, "status"],
    [{ ...good, exitCode: "0" }, "exitCode"],
    [{ ...good, exitCode: 1.5 }, "exitCode"],
    [{ ...good, errno: "EWHATEVER" }, "errno"],
    [{ ...good, content: ["x"] }, "content"],
    [{ ...good, truncated: undefined }, "truncated"],
    [{ ...good, grant: "rwx" }, ""], // an extra key: nothing rides along unread
  ];
  for (const [frame, field] of bad) {
    const e = assertThrows(() => toolResultOf(frame), CtxError);
    assertEquals(e.errno, "EIO");
    assertEquals(
      e.message.startsWith(`tsh sent a malformed tool_result: ${field}:`),
      true,
      e.message,
    );
  }
});
