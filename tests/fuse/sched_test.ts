/** The mount's serving thread at SCHED_RR with --mount-priority N (1 by default, 0: ordinary) while it uses under half a CPU; the host's own thread, the agent instances and the fusermount3 helper never inherit it. */
import { assert, assertEquals } from "../assert.ts";
import { mountedType } from "../../src/fuse/mod.ts";
import {
  addTestAgent,
  cleanup,
  ctxOn,
  type Daemon,
  DENO,
  makeTree,
  receiptAt,
  servingWait,
  startDaemon,
  type Tree,
  until,
} from "../fixture/mod.ts";

/** Policy (sched(7): 0 SCHED_OTHER, 2 SCHED_RR) and rt priority of every thread of `pid`. */
function threads(pid: number): { tid: number; policy: number; rt: number }[] {
  const out = [];
  for (const e of Deno.readDirSync(`/proc/${pid}/task`)) {
    const stat = Deno.readTextFileSync(`/proc/${pid}/task/${e.name}/stat`);
    // Fields after the command name, which may hold spaces: field 3 is f[0], so 40 and 41 are f[37..38].
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    out.push({ tid: Number(e.name), rt: Number(f[37]), policy: Number(f[38]) });
  }
  return out;
}

const rr = (pid: number) => threads(pid).filter((t) => t.policy === 2);

async function withDaemon(args: string[], body: (tree: Tree, d: Daemon) => Promise<void>) {
  const tree = await makeTree();
  addTestAgent(tree, "t"); // served from the start
  let d: Daemon | undefined;
  try {
    d = await startDaemon(tree, { args });
    await body(tree, d);
  } finally {
    await cleanup(tree, d);
  }
}

/** The agent instance's pid, once `ctx agent start` says it is up. */
async function instance(tree: Tree, name: string): Promise<number> {
  const r = await ctxOn(tree, ["agent", "start", name]);
  assertEquals(r.code, 0, r.stderr);
  const receipt = receiptAt(`${tree.run}/instance/${name}.json`);
  assert(receipt, "a started instance has its receipt");
  return receipt.pid;
}

Deno.test("--mount-priority 1: the mount's serving thread runs at SCHED_RR 1; the host thread and an agent instance stay ordinary", async () => {
  await withDaemon(["--mount-priority", "1"], async (tree, d) => {
    const pid = d.child.pid;
    const fast = rr(pid);
    // The worker and the poll threads it started (they inherit it); never the host's main thread.
    assert(fast.length >= 1, JSON.stringify(threads(pid)));
    assert(fast.every((t) => t.rt === 1 && t.tid !== pid), JSON.stringify(fast));
    assert(d.log().includes("serving thread: SCHED_RR 1\n"), d.log());
    const st = await Deno.stat(`${tree.mount}/status`);
    assert(st.isFile);
    const agent = await instance(tree, "t");
    assertEquals(rr(agent), [], "an instance is spawned by the host thread, never real-time");
  });
});

Deno.test("by default the serving thread runs at SCHED_RR 1; with --mount-priority 0 every thread of cortexfsd runs at the ordinary policy", async () => {
  await withDaemon([], async (tree, d) => {
    assert((await Deno.stat(`${tree.mount}/status`)).isFile);
    const fast = rr(d.child.pid);
    assert(fast.length >= 1 && fast.every((t) => t.rt === 1 && t.tid !== d.child.pid), d.log());
    assert(d.log().includes("serving thread: SCHED_RR 1\n"), d.log());
  });
  await withDaemon(["--mount-priority", "0"], async (tree, d) => {
    assert((await Deno.stat(`${tree.mount}/status`)).isFile);
    assertEquals(rr(d.child.pid), []);
    assert(d.log().includes("serving thread: ordinary\n"), d.log());
    assertEquals(JSON.parse(Deno.readTextFileSync(`${tree.mount}/status`)).serving, {
      policy: "ordinary",
      priority: 0,
      drops: 0,
    });
  });
});

function policyOf(pid: number, tid: number): number {
  return threads(pid).find((t) => t.tid === tid)?.policy ?? -1;
}

Deno.test("a flood of requests drops the serving thread to the ordinary policy; once the mount is quiet again, it is back at SCHED_RR", async () => {
  await withDaemon(["--ttl", "0"], async (tree, d) => {
    const pid = d.child.pid;
    assert((await Deno.stat(`${tree.mount}/status`)).isFile);
    const tid = Number((await servingWait(pid)).tid);
    assertEquals(policyOf(pid, tid), 2);
    const target = `${tree.mount}/home/0`;
    Deno.mkdirSync(target, { recursive: true });
    // Four clients stat'ing as fast as they can (uncached: --ttl 0) keep the device from running
    // dry: the thread then uses nearly a CPU (each request costs it about twice the client's
    // CPU, so a loaded machine that leaves them a quarter of a CPU still pushes it over a half).
    const flood = [0, 1, 2, 3].map(() =>
      new Deno.Command(DENO, {
        args: ["eval", `while (true) Deno.statSync(${JSON.stringify(target)});`],
        stdout: "null",
        stderr: "null",
      }).spawn()
    );
    try {
      await until(
        () => policyOf(pid, tid) === 0,
        "the flooded thread at the ordinary policy",
        60_000,
      );
    } finally {
      for (const c of flood) c.kill("SIGKILL");
      await Promise.all(flood.map((c) => c.status));
    }
    // Quiet: the next request's wake finds its share low, and it serves at SCHED_RR again.
    await until(() => {
      Deno.statSync(`${tree.mount}/status`);
      return policyOf(pid, tid) === 2;
    }, "the serving thread back at SCHED_RR");
    assert(d.log().includes("serving thread: SCHED_RR 1\n"), d.log());
    // The status file tells it: real-time now, and how often it was not.
    const serving = JSON.parse(Deno.readTextFileSync(`${tree.mount}/status`)).serving;
    assertEquals(serving.policy, "SCHED_RR");
    assertEquals(serving.priority, 1);
    assert(serving.drops >= 1, JSON.stringify(serving));
  });
});

Deno.test("--fusermount: the auto_unmount helper fusermount3 leaves behind is not real-time", async () => {
  await withDaemon(["--fusermount", "--mount-priority", "1"], async (tree, d) => {
    assert((await Deno.stat(`${tree.mount}/status`)).isFile);
    assert(rr(d.child.pid).length >= 1, d.log());
    const helpers = [...Deno.readDirSync("/proc")].filter((e) => /^\d+$/.test(e.name)).filter(
      (e) => {
        try {
          return Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes(tree.mount) &&
            Deno.readTextFileSync(`/proc/${e.name}/comm`).startsWith("fusermount3");
        } catch {
          return false; // gone meanwhile
        }
      },
    ).map((e) => Number(e.name));
    assert(helpers.length >= 1, "fusermount3's auto_unmount helper is running");
    for (const h of helpers) assertEquals(rr(h), [], `fusermount3 ${h}`);
  });
});

Deno.test("--mount-priority outside 0-99 is refused before anything mounts", async () => {
  const tree = await makeTree();
  try {
    for (const bad of ["100", "-1", "1.5", "x", ""]) {
      const d = await startDaemon(tree, { args: ["--mount-priority", bad], wait: false });
      let code: number | null = null;
      d.child.status.then((s) => code = s.code);
      // Refused: it exits. Taken: it mounts (and is stopped below, failing the test).
      await until(() => code !== null || mountedType(tree.mount) !== null, `cortexfsd on "${bad}"`);
      if (code === null) await d.stop();
      assertEquals(mountedType(tree.mount), null, `${bad}: nothing mounted`);
      await until(() => d.log().includes("--mount-priority"), `cortexfsd's refusal of "${bad}"`);
      assert(code !== 0 && d.log().includes("EINVAL"), `${bad}: ${d.log()}`);
    }
  } finally {
    await cleanup(tree);
  }
});
