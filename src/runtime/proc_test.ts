import { assertEquals } from "../../tests/assert.ts";
import { stopGroup } from "./proc.ts";

Deno.test("stopGroup() ends a step whose group does not exist yet (its setsid has not run)", async () => {
  // Not a group leader, and it forms its group only once told: a cancel that came before setsid.
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", "read go; exec setsid sleep 600"],
    stdin: "piped",
    stdout: "null",
  }).spawn();
  try {
    await stopGroup(child, 50);
    assertEquals((await child.status).signal, "SIGTERM");
  } finally {
    await child.stdin.close().catch(() => {});
  }
});
