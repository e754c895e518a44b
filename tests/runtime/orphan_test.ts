/** A `kill -9`ed daemon takes its agents' sandboxes with it; the next start drops their receipts and stops only what a receipt proves. */
import { assert, assertEquals } from "../assert.ts";
import { GROUP_SCHEMA, groupsDir } from "../../src/runtime/groups.ts";
import { bootId, startTime } from "../../src/sandbox/receipt.ts";
import {
  addTestAgent,
  cleanup,
  makeTree,
  Raw,
  runPids,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

function receipts(f: Tree): string[] {
  return [...Deno.readDirSync(groupsDir(f.run))].map((e) => e.name).sort();
}

async function waitFor(pred: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !pred(); i++) await new Promise((r) => setTimeout(r, 10));
}

/** Reads a pid the test agent wrote (it writes them right after its first delta). */
async function pidFile(path: string): Promise<number> {
  await waitFor(() => {
    try {
      return Deno.readTextFileSync(path).trim() !== "";
    } catch (e) {
      ignore(e, Deno.errors.NotFound);
      return false;
    }
  });
  return Number(Deno.readTextFileSync(path));
}

Deno.test("after kill -9 of the daemon its agent's sandbox dies with it (a child that left the group too); the restart drops the receipt; a receipt of another process kills nothing", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  // An unrelated process in a group of its own, as a reused pid would be.
  const bystander = new Deno.Command("setsid", { args: ["sleep", "60"], stdin: "null" }).spawn();
  let d = await startRuntimeDaemon(f);
  try {
    assertEquals(d.reaped(), { stopped: [], stale: [], unchecked: [] });
    // A finished step leaves no receipt behind.
    const c0 = await Raw.connect(`${f.root}/agent/t.sock`);
    c0.write({ op: "send", id: "quick", input: "echo hi" });
    assertEquals((await c0.run()).at(-1)?.status, "ok");
    c0.close();
    assertEquals(receipts(f), []);

    const c = await Raw.connect(`${f.root}/agent/t.sock`);
    c.write({ op: "send", id: "long", input: "sleep" });
    const run = String((await c.until((fs) => fs.some((x) => x.type === "delta")))[0].run);
    await pidFile(`${f.logs}/${run}.leader`); // the agent has started its background child
    const [agent, child] = runPids(run);
    assert(child !== undefined && alive(agent) && alive(child));
    // The live step is on record: the sandbox's group leader (bwrap), its /proc start time, boot.
    const [file] = receipts(f);
    const leader = Number(file.replace(/\.json$/, ""));
    const rec = JSON.parse(Deno.readTextFileSync(`${groupsDir(f.run)}/${file}`));
    assertEquals(rec, {
      schema: GROUP_SCHEMA,
      pid: leader,
      pgid: leader,
      start: startTime(leader),
      boot: bootId(),
      run,
      agent: "t",
      step: 0,
    });
    await d.kill9();
    c.close();
    // bwrap dies with the daemon, and its pid namespace with it: nothing runs on as an orphan.
    await waitFor(() => !alive(leader) && !alive(agent) && !alive(child));
    assertEquals([alive(leader), alive(agent), alive(child)], [false, false, false]);

    // Receipts that must kill nothing: the bystander with a start time that is not its own (a
    // reused pid), and with its real start time but another boot's id.
    const fake = (start: string, boot: string) =>
      JSON.stringify({
        schema: GROUP_SCHEMA,
        pid: bystander.pid,
        pgid: bystander.pid,
        start,
        boot,
        run: "ctx-00000000000000000000000000000000",
        agent: "t",
        step: 0,
      }) + "\n";
    const real = startTime(bystander.pid);
    Deno.writeTextFileSync(`${groupsDir(f.run)}/${bystander.pid}.json`, fake("1", bootId()));
    Deno.writeTextFileSync(
      `${groupsDir(f.run)}/99999999.json`,
      fake(real, "00000000-0000-0000-0000-000000000000").replaceAll(
        `${bystander.pid}`,
        "99999999",
      ),
    );

    d = await startRuntimeDaemon(f);
    assertEquals(d.reaped(), {
      stopped: [],
      stale: [`${bystander.pid}.json`, "99999999.json", `${leader}.json`].sort(),
      unchecked: [],
    });
    assertEquals(alive(bystander.pid), true);
    assertEquals(receipts(f), []);
    // The interrupted run was closed, and the runtime serves the next request.
    assertEquals((await d.started("t")).recovered, [run]);
    const c2 = await Raw.connect(`${f.root}/agent/t.sock`);
    c2.write({ op: "send", id: "after", input: "echo again" });
    assertEquals((await c2.run()).at(-1)?.status, "ok");
    c2.close();
  } finally {
    await d.stop();
    try {
      bystander.kill("SIGKILL");
    } catch (e) {
      ignore(e, TypeError); /* gone */
    }
    await bystander.status;
    await cleanup(f);
  }
});

Deno.test("a receipt whose pid is gone, or that does not parse, is dropped without a signal", async () => {
  const f = await makeTree();
  try {
    Deno.mkdirSync(groupsDir(f.run), { recursive: true });
    // A pid that exited: its receipt is stale.
    const gone = new Deno.Command("true").spawn();
    await gone.status;
    Deno.writeTextFileSync(
      `${groupsDir(f.run)}/${gone.pid}.json`,
      JSON.stringify({
        schema: GROUP_SCHEMA,
        pid: gone.pid,
        pgid: gone.pid,
        start: "1",
        boot: bootId(),
        run: "x",
        agent: "t",
        step: 0,
      }),
    );
    Deno.writeTextFileSync(`${groupsDir(f.run)}/junk.json`, "{not json");
    const d = await startRuntimeDaemon(f);
    await d.stop();
    assertEquals(d.reaped(), {
      stopped: [],
      stale: [`${gone.pid}.json`, "junk.json"].sort(),
      unchecked: [],
    });
    assert(receipts(f).length === 0);
  } finally {
    await cleanup(f);
  }
});
