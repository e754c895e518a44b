/** stopGroup(): a step's leader stopped (waited for as an event), its own children killed, the group ended. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { gone, until } from "../../tests/fixture/mod.ts";
import { closeFd } from "../sys/sock.ts";
import { pidfdOpen, W, waitChildSync } from "../sys/wait.ts";
import { stopGroup } from "./proc.ts";
import { INSTANCE_CAPS } from "../host/caps.ts";
import { ignore } from "../abi/errno.ts";

/** A step running `script` under bash that prints one line (a pid) first; that pid. */
async function stepWithPid(script: string): Promise<{ child: Deno.ChildProcess; pid: number }> {
  const child = new Deno.Command("/bin/bash", {
    args: ["-c", script],
    stdin: "null",
    stdout: "piped",
    stderr: "null", // bash's "Killed" notice for the child it loses
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) text += (await reader.read()).value ?? "";
  reader.releaseLock();
  return { child, pid: Number(text.trim()) };
}

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
  const { child, pid: orphan } = await stepWithPid("setsid sleep 600 & echo $!; wait");
  try {
    assert(!gone(orphan), "the session's own child runs");
    await stopGroup(child, 50);
    await child.status;
    await until(() => gone(orphan), `pid ${orphan} to end with the stopped step`, 10_000);
  } finally {
    try {
      Deno.kill(orphan, "SIGKILL");
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone */
    }
    await child.stdout.cancel().catch(() => {});
  }
});

Deno.test("stopGroup() stops a leader that ignores every signal it can (SIGSTOP it cannot) and kills its children", async () => {
  // The leader shrugs off SIGTERM (an ignored signal stays ignored across its exec): only SIGSTOP
  // (to find its children) and SIGKILL reach it. The stop is an event: it ends the wait, not the
  // bound (which a poll that missed it would reach).
  const { child, pid: orphan } = await stepWithPid(
    "trap '' HUP INT QUIT TERM TSTP TTIN TTOU USR1 USR2; " +
      "setsid sleep 600 & echo $!; wait; exec sleep 600",
  );
  try {
    const how = await stopGroup(child, 50);
    assertEquals({ ...await child.status }, { success: false, code: 137, signal: "SIGKILL" });
    assertEquals(how, "stopped", "the stop itself ended the wait, not its bound");
    await until(() => gone(orphan), `pid ${orphan} to end with the stopped step`, 10_000);
  } finally {
    try {
      Deno.kill(orphan, "SIGKILL");
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone */
    }
    await child.stdout.cancel().catch(() => {});
  }
});

Deno.test("stopGroup() of a leader that already exited (a zombie not yet reaped) leaves its status to Deno", async () => {
  const child = new Deno.Command("/bin/sh", { args: ["-c", "exit 7"], stdout: "null" }).spawn();
  const pidfd = pidfdOpen(child.pid); // same turn as the spawn: Deno has reaped nothing
  assert(pidfd >= 0, `pidfd_open: ${pidfd}`);
  try {
    // Blocks this thread until the exit (W.NOWAIT: still unreaped), so Deno's reaper, which runs
    // only from this thread's event loop, cannot take it before stopGroup begins.
    assertEquals(waitChildSync(pidfd, W.EXITED | W.NOWAIT), {
      pid: child.pid,
      how: "exited",
      status: 7,
    });
    const how = await stopGroup(child, 50);
    // The exit ended the wait, not its bound: seen by waitid (W.NOWAIT left the status to Deno)
    // or, when Deno's reaper ran first, as ECHILD on a pidfd whose process is gone.
    assertEquals({ ...await child.status }, { success: false, code: 7, signal: null });
    assert(how === "exited" || how === "gone", `the stop wait ended ${how}, not at the exit`);
  } finally {
    closeFd(pidfd);
  }
});

Deno.test({
  name:
    "stopGroup() as a uid's sender, in a process without CAP_KILL (an instance): the uid's leader is stopped and its child in a session of its own killed",
  ignore: Deno.uid() !== 0,
  async fn() {
    // The instance's own capability set (src/host/caps.ts), and a step that dropped to uid
    // 65534 as a sandboxed step does (setpriv), ignoring what it can as in the test above.
    const step = [
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      "--",
      "/bin/bash",
      "-c",
      "trap '' HUP INT QUIT TERM TSTP TTIN TTOU USR1 USR2; " +
      "setsid sleep 600 & echo $!; wait; exec sleep 600",
    ];
    const code = `const { stopGroup } = await import("${import.meta.resolve("./proc.ts")}");
      const child = new Deno.Command("setpriv", { args: ${JSON.stringify(step)},
        stdin: "null", stdout: "piped", stderr: "null" }).spawn();
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("\\n")) text += (await reader.read()).value ?? "";
      console.log(text.trim());
      const how = await stopGroup(child, 50, 65534);
      console.log(JSON.stringify({ how, status: { ...await child.status } }));
      Deno.exit(0);`;
    const out = await new Deno.Command("setpriv", {
      args: [
        `--bounding-set=-all,${INSTANCE_CAPS.map((c) => `+${c}`).join(",")}`,
        "--inh-caps=-all",
        "--",
        Deno.execPath(),
        "eval",
        "--quiet",
        code,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    const orphan = Number(lines[0]);
    try {
      assert(out.success && orphan > 0, new TextDecoder().decode(out.stderr) + lines.join("\n"));
      assertEquals(JSON.parse(lines[1]), {
        how: "stopped",
        status: { success: false, code: 137, signal: "SIGKILL" },
      });
      await until(() => gone(orphan), `pid ${orphan} to end with the stopped step`, 10_000);
    } finally {
      try {
        if (orphan > 0) Deno.kill(orphan, "SIGKILL");
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* gone */
      }
    }
  },
});
