/** The terminal supervisor's receipts (src/runtime/terminals.ts) with a stand-in ctxterm: held until its receipt is on disk, stopped only as the receipt proves, reaped at start. */
import { assert, assertEquals } from "../assert.ts";
import { gone, makeTree } from "../fixture/mod.ts";
import { startTerminals } from "../../src/runtime/terminals.ts";
import { startTime } from "../../src/sandbox/receipt.ts";
import { openDir } from "../../src/sandbox/workspace.ts";
import { closeFd } from "../../src/sys/sock.ts";

const root = Deno.uid() === 0;

/**
 * A stand-in for ctxterm (its arguments are ignored): waits for `go`, records that the receipt was
 * there when it was released, prints a ready line, then sleeps in place (same pid, same start time).
 */
function standIn(mark: string, receipt: string): string[] {
  const script = `read line; [ "$line" = go ] || exit 0
[ -f '${receipt}' ] && echo held > '${mark}'
printf '{"ready":true,"pid":%s,"socket":"s","child":0}\\n' $$
exec sleep 600`;
  return ["/bin/sh", "-c", script, "standin"];
}

Deno.test({
  name:
    "a terminal unit is held until its receipt is on disk; a start is idempotent; a stop whose receipt no longer matches (pid reused) signals nothing",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const receipt = `${f.run}/terminal/coder/default.json`;
    const terms = await startTerminals({
      root: f.root,
      run: f.run,
      command: standIn(`${f.dir}/mark`, receipt),
      graceMs: 200,
    });
    const ws = openDir(f.dir);
    let pid = 0;
    try {
      const a = await terms.start({ agent: "coder", session: "default", uid: 0, workspace: ws });
      pid = a.terminal.pid;
      assertEquals([a.already, a.terminal.state], [false, "running"]);
      assertEquals(Deno.readTextFileSync(`${f.dir}/mark`), "held\n");
      const r = JSON.parse(Deno.readTextFileSync(receipt));
      assertEquals([r.pid, r.start_time, r.unit], [
        pid,
        startTime(pid),
        "cortexfs-term-coder-default",
      ]);
      const b = await terms.start({ agent: "coder", session: "default", uid: 0, workspace: ws });
      assertEquals([b.already, b.terminal.id], [true, a.terminal.id]);
      // The pid now names "another" process (its start time differs): nothing is signalled.
      a.terminal.receipt.start_time = String(Number(r.start_time) - 1);
      const stopped = await terms.stop("coder");
      assertEquals(stopped.map((s) => s.result), ["stale"]);
      assert(!gone(pid), "the process the stale receipt named lives");
      assertEquals(terms.list("coder"), []);
    } finally {
      closeFd(ws);
      if (pid && !gone(pid)) Deno.kill(pid, "SIGKILL");
      await terms.close();
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "terminal supervisor start: a live terminal a killed host left is stopped by its receipt, a forged receipt naming a live process with another start time kills nothing; both are cleared",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const live = new Deno.Command("setsid", { args: ["sleep", "600"] }).spawn();
    const victim = new Deno.Command("sleep", { args: ["600"] }).spawn();
    try {
      const dir = `${f.run}/terminal/coder`;
      Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
      // setsid(1) forks when it is a group leader: wait for the sleep to lead its own group.
      let leader = 0;
      for (let i = 0; i < 500 && !leader; i++) {
        const stat = Deno.readTextFileSync(`/proc/${live.pid}/stat`).split(") ")[1].split(" ");
        if (Number(stat[2]) === live.pid) leader = live.pid;
        else await new Promise((r) => setTimeout(r, 10));
      }
      assert(leader, "setsid made its group");
      const boot = Deno.readTextFileSync("/proc/sys/kernel/random/boot_id").trim();
      const receipt = (pid: number, session: string, start: string) => ({
        schema: "cortexfs.instance-receipt/v1",
        unit: `cortexfs-term-coder-${session}`,
        invocation: "0".repeat(32),
        agent: "coder",
        pid,
        pgid: pid,
        start_time: start,
        boot_id: boot,
        uid: 0,
        started_at: 0,
        session,
        terminal: "t-1",
        owner: 0,
      });
      Deno.writeTextFileSync(
        `${dir}/default.json`,
        JSON.stringify(receipt(leader, "default", startTime(leader))),
      );
      Deno.writeTextFileSync(
        `${dir}/s2.json`,
        JSON.stringify(receipt(victim.pid, "s2", String(Number(startTime(victim.pid)) - 1))),
      );
      const terms = await startTerminals({ root: f.root, run: f.run, command: [], graceMs: 5000 });
      assertEquals(terms.reaped, { stopped: ["coder/default"], stale: ["coder/s2"] });
      assertEquals((await live.status).signal, "SIGTERM");
      assert(!gone(victim.pid), "the forged receipt's pid was never signalled");
      assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), []);
      await terms.close();
    } finally {
      for (const c of [live, victim]) {
        try {
          c.kill("SIGKILL");
        } catch { /* gone */ }
        await c.status;
      }
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});
