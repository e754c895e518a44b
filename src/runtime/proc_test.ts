import { assert, assertEquals } from "../../tests/assert.ts";
import { gone, until } from "../../tests/fixture/mod.ts";
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

Deno.test("stopGroup() also ends a child of the step that lives in a session of its own (a sandbox init)", async () => {
  // As bwrap's init after --new-session: neither in the step's group nor killed with its parent.
  const child = new Deno.Command("/bin/bash", {
    args: ["-c", "setsid sleep 600 & echo $!; wait"],
    stdin: "null",
    stdout: "piped",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) text += (await reader.read()).value ?? "";
  reader.releaseLock();
  const orphan = Number(text.trim());
  try {
    assert(!gone(orphan), "the session's own child runs");
    await stopGroup(child, 50);
    await child.status;
    await until(() => gone(orphan), `pid ${orphan} to end with the stopped step`, 10_000);
  } finally {
    try {
      Deno.kill(orphan, "SIGKILL");
    } catch { /* gone */ }
    await child.stdout.cancel().catch(() => {});
  }
});
