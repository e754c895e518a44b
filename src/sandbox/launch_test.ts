/** reapInit(): the wait for a sandbox init that is no child of ours is its pidfd's readability, pinned to the receipt; the rest of launch() runs bwrap (tests/sandbox/launch_test.ts). */
import { assertEquals } from "../../tests/assert.ts";
import { type Orphan, orphan, pidfdsSince, polledPids } from "../../tests/fixture/proc.ts";
import { until } from "../../tests/fixture/wait.ts";
import { reapInit } from "./launch.ts";
import { bootId, type Receipt, receiptSeen, startTime } from "./receipt.ts";

/** A receipt of `o` as launch() records one for a sandbox init (no launcher to speak of). */
function receiptOf(o: Orphan): Receipt {
  return { pid: o.pid, start: startTime(o.pid), launcher: 0, boot: bootId() };
}

Deno.test("reapInit() ends at the init's exit, seen as an event (its pidfd readable), and sends no signal", async () => {
  const o = await orphan({ ignoreTerm: true });
  const left = pidfdsSince([o.pid]);
  try {
    const reaping = reapInit(receiptOf(o), { exitMs: 60_000 });
    await until(() => polledPids().some((p) => p.includes(o.pid)), "a poll(2) on the init's pidfd");
    await o.release();
    assertEquals(await reaping, "exited", "the exit ended the wait, not the bound");
    assertEquals(await o.ended(), "go\n", "it exited by itself: no SIGKILL reached it");
    assertEquals(left(), []);
  } finally {
    await o.close();
  }
});

Deno.test("reapInit() SIGKILLs an init that outlives its bound, through the pidfd, and sees it end", async () => {
  const o = await orphan({ ignoreTerm: true });
  const left = pidfdsSince([o.pid]);
  try {
    assertEquals(await reapInit(receiptOf(o), { exitMs: 0, killMs: 60_000 }), "killed");
    assertEquals(await o.ended(), "", "the SIGKILL ended it before its line came");
    assertEquals(left(), []);
  } finally {
    await o.close();
  }
});

Deno.test("reapInit() of a receipt its pid no longer matches (other start time, other boot) signals nothing: gone", async () => {
  const o = await orphan({ ignoreTerm: true });
  const left = pidfdsSince([o.pid]);
  try {
    const r = receiptOf(o);
    const reused = { ...r, start: String(Number(r.start) - 1) };
    const otherBoot = { ...r, boot: "00000000-0000-0000-0000-000000000000" };
    assertEquals(await reapInit(reused, { exitMs: 0, killMs: 0 }), "gone");
    assertEquals(await reapInit(otherBoot, { exitMs: 0, killMs: 0 }), "gone");
    assertEquals(left(), [], "the pidfd opened before the check is closed again");
    await o.release();
    assertEquals(await o.ended(), "go\n", "it ran until told: no SIGKILL reached it");
  } finally {
    await o.close();
  }
});

Deno.test("reapInit() of an init that has already exited waits for nothing: gone", async () => {
  const o = await orphan();
  try {
    const r = receiptOf(o);
    await o.release();
    assertEquals(await o.ended(), "go\n");
    // Its output ends before it exits: wait until the receipt no longer names a live process
    // (a loaded machine ran reapInit in between once, and it waited for the exit: "exited").
    await until(() => receiptSeen(r) !== "live", "the init's exit");
    // Exited (a zombie, or reaped: then its pid may even name another process): nothing to wait for.
    assertEquals(await reapInit(r, { exitMs: 60_000, killMs: 60_000 }), "gone");
  } finally {
    await o.close();
  }
});
