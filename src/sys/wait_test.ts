/** waitChild()/waitChildSync(): stops and exits of a Deno.Command child as events, leaving its reaping to Deno; waitExits(): any process's exit as a readable pidfd. */
import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { orphan, polledPids, polls } from "../../tests/fixture/proc.ts";
import { until } from "../../tests/fixture/wait.ts";
import { closeFd, pidfdAlive } from "./sock.ts";
import { type ChildReport, pidfdOpen, W, waitChild, waitChildSync, waitExits } from "./wait.ts";

const ESRCH = 3;
const ECHILD = 10;
const SIGKILL = 9;
const SIGSTOP = 19;

function spawn(script: string): { child: Deno.ChildProcess; pidfd: number } {
  const child = new Deno.Command("/bin/sh", { args: ["-c", script], stdout: "null" }).spawn();
  // Same turn as the spawn: Deno reaps only from this thread's event loop, so the pid is the child's.
  const pidfd = pidfdOpen(child.pid);
  if (pidfd < 0) throw new Error(`pidfd_open(${child.pid}): ${pidfd}`);
  return { child, pidfd };
}

Deno.test("waitChild() reports a stop without consuming it, and Deno still reaps the child", async () => {
  const { child, pidfd } = spawn("exec sleep 600");
  try {
    child.kill("SIGSTOP");
    const stop: ChildReport = { pid: child.pid, how: "stopped", status: SIGSTOP };
    assertEquals(await waitChild(pidfd, W.STOPPED | W.EXITED | W.NOWAIT), stop);
    // W.NOWAIT left the report (and Deno's wait4 never asks for stops: it has not taken it).
    assertEquals(waitChildSync(pidfd, W.STOPPED | W.NOHANG | W.NOWAIT), stop);
    child.kill("SIGKILL");
    assertEquals({ ...await child.status }, { success: false, code: 137, signal: "SIGKILL" });
  } finally {
    closeFd(pidfd);
  }
});

Deno.test("waitChild() with W.NOWAIT leaves an exited child's status to Deno's reaper", async () => {
  const { child, pidfd } = spawn("exit 7");
  try {
    const exit: ChildReport = { pid: child.pid, how: "exited", status: 7 };
    // On this thread, so Deno cannot reap in between: the child is a zombie and stays one.
    assertEquals(waitChildSync(pidfd, W.EXITED | W.NOWAIT), exit);
    assertEquals(waitChildSync(pidfd, W.EXITED | W.NOHANG | W.NOWAIT), exit); // still there
    assertEquals({ ...await child.status }, { success: false, code: 7, signal: null });
    // Reaped by Deno now: waitid has no child to report, and the pidfd names a process that is gone.
    assertEquals(waitChildSync(pidfd, W.EXITED | W.NOWAIT), -ECHILD);
    assertEquals(await waitChild(pidfd, W.EXITED | W.NOWAIT), -1);
    assertEquals(pidfdAlive(pidfd), -ESRCH);
  } finally {
    closeFd(pidfd);
  }
});

Deno.test("a stop report consumed by waitChild() does not confuse Deno's reaper", async () => {
  const { child, pidfd } = spawn("exec sleep 600");
  try {
    child.kill("SIGSTOP");
    const stop: ChildReport = { pid: child.pid, how: "stopped", status: SIGSTOP };
    assertEquals(await waitChild(pidfd, W.STOPPED), stop);
    assertEquals(waitChildSync(pidfd, W.STOPPED | W.NOHANG | W.NOWAIT), null); // taken
    child.kill("SIGKILL");
    assertEquals({ ...await child.status }, { success: false, code: 137, signal: "SIGKILL" });
  } finally {
    closeFd(pidfd);
  }
});

Deno.test("waitChild() reports a child killed while it waits", async () => {
  const { child, pidfd } = spawn("exec sleep 600");
  try {
    const waited = waitChild(pidfd, W.EXITED | W.NOWAIT);
    child.kill("SIGKILL");
    const got = await waited;
    // Either the zombie's report, or -1 (ECHILD) when Deno's reaper ran first: both end the wait.
    if (got !== -1) assertEquals(got, { pid: child.pid, how: "killed", status: SIGKILL });
    assertEquals((await child.status).signal, "SIGKILL");
  } finally {
    closeFd(pidfd);
  }
});

Deno.test("an exit taken without W.NOWAIT is lost to Deno: child.status rejects (ECHILD)", async () => {
  const { child, pidfd } = spawn("exit 7");
  try {
    const exit: ChildReport = { pid: child.pid, how: "exited", status: 7 };
    assertEquals(waitChildSync(pidfd, W.EXITED), exit); // reaped here, on this thread
    const e = await assertRejects(() => child.status);
    assertEquals(String(e), "Error: No child processes (os error 10)");
  } finally {
    closeFd(pidfd);
  }
});

/** A pidfd of `pid` (an orphan blocked on its read: it cannot exit, so its pid is not reused). */
function pin(pid: number): number {
  const fd = pidfdOpen(pid);
  assert(fd >= 0, `pidfd_open(${pid}): ${fd}`);
  return fd;
}

Deno.test("waitExits() ends at the exit of a process that is no child of ours (waitid cannot see it)", async () => {
  const o = await orphan();
  const fd = pin(o.pid);
  try {
    assertEquals(waitChildSync(fd, W.EXITED | W.NOHANG | W.NOWAIT), -ECHILD);
    const waited = waitExits([fd], 60_000);
    await o.release();
    assertEquals(await waited, [], "its exit ended the wait, not the bound");
  } finally {
    closeFd(fd);
    await o.close();
  }
});

Deno.test("waitExits() waits for every pidfd, and resolves to those still running at the bound", async () => {
  const a = await orphan(), b = await orphan();
  const fa = pin(a.pid), fb = pin(b.pid);
  try {
    assertEquals(await waitExits([fa, fb], 0), [fa, fb]);
    await a.release();
    assertEquals(await waitExits([fa], 60_000), []);
    assertEquals(await waitExits([fa, fb], 0), [fb]);
    const both = waitExits([fa, fb], 60_000);
    await b.release();
    assertEquals(await both, [], "the second exit ended the wait, not the bound");
  } finally {
    closeFd(fa);
    closeFd(fb);
    await a.close();
    await b.close();
  }
});

Deno.test("waitExits() waits in one poll(2) over all its pidfds on a thread of its own, and leaves none once the exits came", async () => {
  const a = await orphan(), b = await orphan();
  const fa = pin(a.pid), fb = pin(b.pid);
  try {
    const both = waitExits([fa, fb], 60_000);
    // One thread blocked in one poll(2) over both pidfds, while this (the JS) thread runs on.
    const pair = [a.pid, b.pid].sort((x, y) => x - y);
    await until(
      () => polledPids().some((p) => p.join() === pair.join()),
      "one poll(2) on both pidfds",
    );
    await a.release();
    await b.release();
    assertEquals(await both, []);
    assertEquals(polls().filter((p) => p.includes(fa) || p.includes(fb)), [], "no poll is left");
  } finally {
    closeFd(fa);
    closeFd(fb);
    await a.close();
    await b.close();
  }
});
