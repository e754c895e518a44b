import { assert, assertEquals } from "../../tests/assert.ts";
import { type Orphan, orphan, pgidOf, pidfdsSince, polledPids } from "../../tests/fixture/proc.ts";
import { until } from "../../tests/fixture/wait.ts";
import { startTime } from "../sandbox/receipt.ts";
import {
  type InstanceReceipt,
  parseReceipt,
  reapReceipts,
  receiptMatches,
  receiptOf,
  stopVerified,
  writeReceipt,
} from "./receipt.ts";
import { ignore } from "../abi/errno.ts";

function alive(pid: number): boolean {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1][0] !== "Z";
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/**
 * A `sleep` in its own process group (as an instance is: the supervisor's spawn runs setsid
 * before it returns), and its receipt. `setsid(1)` runs setsid() only once it is executing, so
 * the receipt waits for the group to exist: a signal to it before then would reach nothing.
 */
async function victim(): Promise<{ child: Deno.ChildProcess; receipt: InstanceReceipt }> {
  const child = new Deno.Command("setsid", {
    args: ["sleep", "60"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  for (let i = 0; i < 1000 && pgidOf(child.pid) !== child.pid; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const receipt = receiptOf("t", child.pid, { uid: 0 });
  if (!receipt) throw new Error("sleep is gone");
  return { child, receipt };
}

Deno.test("receiptOf() records pid, pgid, /proc start time, boot id, unit and a 128-bit invocation", async () => {
  const { child, receipt } = await victim();
  try {
    assertEquals(parseReceipt(JSON.stringify(receipt)), receipt);
    assertEquals(
      [receipt.unit, receipt.pgid, receipt.start_time],
      ["cortexfs-agent-t", child.pid, startTime(child.pid)],
    );
    assert(/^[0-9a-f]{32}$/.test(receipt.invocation));
    assert(receiptMatches(receipt));
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
});

Deno.test("stopVerified() kills nothing for a reused pid (other start time or boot); a matching one is stopped", async () => {
  const { child, receipt } = await victim();
  try {
    const reused = { ...receipt, start_time: String(Number(receipt.start_time) - 1) };
    const otherBoot = { ...receipt, boot_id: "00000000-0000-0000-0000-000000000000" };
    assertEquals(await stopVerified(reused, { graceMs: 100 }), "stale");
    assertEquals(await stopVerified(otherBoot, { graceMs: 100 }), "stale");
    assert(alive(child.pid));
    assertEquals(await stopVerified(receipt, { graceMs: 2000, exited: child.status }), "exited");
    assertEquals((await child.status).signal, "SIGTERM");
  } finally {
    try {
      child.kill("SIGKILL");
    } catch (e) {
      ignore(e, TypeError); /* gone */
    }
    await child.status;
  }
});

Deno.test("reapReceipts() stops a matching orphan, clears a reused one untouched, removes every receipt", async () => {
  const dir = Deno.makeTempDirSync();
  const a = await victim(), b = await victim();
  try {
    writeReceipt(dir, { ...a.receipt, agent: "a", unit: "cortexfs-agent-a" });
    writeReceipt(dir, {
      ...b.receipt,
      agent: "b",
      unit: "cortexfs-agent-b",
      start_time: String(Number(b.receipt.start_time) - 1),
    });
    Deno.writeTextFileSync(`${dir}/junk.json`, "{");
    const seen: [string, boolean][] = [];
    const r = await reapReceipts(dir, {
      graceMs: 2000,
      onReaped: (n, live) => seen.push([n, live]),
    });
    assertEquals(r, { stopped: ["a"], stale: ["b.json", "junk.json"], unchecked: [] });
    assertEquals(seen.sort(), [["a", true], ["b", false]]);
    assertEquals([...Deno.readDirSync(dir)], []);
    await a.child.status;
    assert(alive(b.child.pid));
  } finally {
    for (const v of [a, b]) {
      try {
        v.child.kill("SIGKILL");
      } catch (e) {
        ignore(e, TypeError); /* gone */
      }
      await v.child.status;
    }
    Deno.removeSync(dir, { recursive: true });
  }
});

/** The receipt of an orphan instance a killed host left (it leads its own group, as one does). */
function orphanReceipt(o: Orphan): InstanceReceipt {
  const r = receiptOf("t", o.pid, { uid: 0 });
  if (!r) throw new Error(`${o.pid} is gone`);
  return r;
}

Deno.test("stopVerified() without an exit event ends at the orphan's exit, seen as an event (its pidfd)", async () => {
  const o = await orphan({ ignoreTerm: true }); // only its line ends it
  const left = pidfdsSince([o.pid]);
  try {
    const stopping = stopVerified(orphanReceipt(o), { graceMs: 60_000 });
    await until(() => polledPids().some((p) => p.includes(o.pid)), "a poll(2) on its pidfd");
    await o.release();
    assertEquals(await stopping, "exited", "the exit ended the grace, not its bound");
    assertEquals(await o.ended(), "go\n", "it exited by itself: no SIGKILL reached it");
    assertEquals(left(), []);
  } finally {
    await o.close();
  }
});

Deno.test("stopVerified() without an exit event SIGKILLs an orphan that outlives the grace, and returns once it is gone", async () => {
  const o = await orphan({ ignoreTerm: true });
  const left = pidfdsSince([o.pid]);
  try {
    assertEquals(await stopVerified(orphanReceipt(o), { graceMs: 0 }), "killed");
    assertEquals(await o.ended(), "", "the SIGKILL ended it before its line came");
    assertEquals(left(), []);
  } finally {
    await o.close();
  }
});

Deno.test("stopVerified() of an orphan its receipt no longer matches (a reused pid) signals nothing, its pidfd closed again", async () => {
  const o = await orphan(); // SIGTERM would end it: no signal may reach it
  const left = pidfdsSince([o.pid]);
  try {
    const r = orphanReceipt(o);
    const reused = { ...r, start_time: String(Number(r.start_time) - 1) };
    assertEquals(await stopVerified(reused, { graceMs: 60_000 }), "stale");
    assertEquals(left(), []);
    await o.release();
    assertEquals(await o.ended(), "go\n", "it ran until told");
  } finally {
    await o.close();
  }
});
