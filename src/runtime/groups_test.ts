/** reapGroups(): a killed daemon's leftover groups stopped as their receipts prove, the grace ended by the leaders' exits (pidfds, no children of ours) or its bound. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { type Orphan, orphan, pidfdsSince, polledPids } from "../../tests/fixture/proc.ts";
import { until } from "../../tests/fixture/wait.ts";
import { reapGroups, recordGroup } from "./groups.ts";
import { INSTANCE_CAPS } from "../host/caps.ts";
import { ignore } from "../abi/errno.ts";

/** Records `o` as a step's group in `dir`: its receipt file's name. */
async function record(dir: string, o: Orphan): Promise<string> {
  const path = await recordGroup(dir, o.pid, { run: "ctx-0", agent: "t", step: 0 });
  assert(path, `no receipt for ${o.pid}`);
  return path.slice(dir.length + 1);
}

Deno.test("reapGroups() ends the grace once every leader has exited, each exit seen as an event (its pidfd)", async () => {
  const dir = Deno.makeTempDirSync();
  const a = await orphan({ ignoreTerm: true }), b = await orphan({ ignoreTerm: true });
  try {
    await record(dir, a);
    await record(dir, b);
    const left = pidfdsSince([a.pid, b.pid]);
    const graces: number[][] = [];
    // SIGTERM is ignored: only the line each is given ends it, within a grace no test outlasts.
    const reaping = reapGroups(dir, { graceMs: 60_000, onGrace: (late) => graces.push(late) });
    const pair = [a.pid, b.pid].sort((x, y) => x - y);
    await until(
      () => polledPids().some((p) => p.join() === pair.join()),
      "one poll(2) on both leaders' pidfds",
    );
    await a.release();
    await b.release();
    assertEquals(await reaping, {
      stopped: [a.pid, b.pid].sort((x, y) => x - y),
      stale: [],
      unchecked: [],
    });
    assertEquals(graces, [[]], "the exits ended the grace, not its bound");
    assertEquals([await a.ended(), await b.ended()], ["go\n", "go\n"]);
    assertEquals(left(), []);
    assertEquals([...Deno.readDirSync(dir)], []);
  } finally {
    await a.close();
    await b.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("reapGroups() SIGKILLs the groups whose leader outlives the grace, and says which", async () => {
  const dir = Deno.makeTempDirSync();
  const a = await orphan({ ignoreTerm: true });
  try {
    await record(dir, a);
    const left = pidfdsSince([a.pid]);
    const graces: number[][] = [];
    const r = await reapGroups(dir, { graceMs: 0, onGrace: (late) => graces.push(late) });
    assertEquals([r, graces], [{ stopped: [a.pid], stale: [], unchecked: [] }, [[a.pid]]]);
    assertEquals(await a.ended(), "", "the SIGKILL ended it before its line came");
    assertEquals(left(), []);
  } finally {
    await a.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("reapGroups() drops a receipt its pid no longer matches (a reused pid) without a signal, its pidfd closed again", async () => {
  const dir = Deno.makeTempDirSync();
  const a = await orphan(); // SIGTERM would end it: no signal may reach it
  try {
    const file = await record(dir, a);
    const rec = JSON.parse(Deno.readTextFileSync(`${dir}/${file}`));
    const other = { ...rec, start: String(Number(rec.start) - 1) };
    Deno.writeTextFileSync(`${dir}/${file}`, JSON.stringify(other) + "\n");
    const left = pidfdsSince([a.pid]);
    const graces: number[][] = [];
    const r = await reapGroups(dir, { onGrace: (late) => graces.push(late) });
    assertEquals([r, graces], [{ stopped: [], stale: [file], unchecked: [] }, []]);
    assertEquals(left(), []);
    await a.release();
    assertEquals(await a.ended(), "go\n", "it ran until told");
  } finally {
    await a.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "reapGroups() in a process without CAP_KILL (an instance) stops a uid's leftover group: the signals go as the leader's uid",
  ignore: Deno.uid() !== 0,
  async fn() {
    const dir = Deno.makeTempDirSync();
    // A step's group after its setpriv: uid 65534, its own group (setsid execs in place), deaf to
    // SIGTERM, so only the SIGKILL ends it.
    const leader = new Deno.Command("setpriv", {
      args: ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "setsid", "/bin/bash", "-c"]
        .concat(["trap '' TERM; echo up; exec sleep 600"]),
      stdin: "null",
      stdout: "piped",
    }).spawn();
    try {
      const reader = leader.stdout.pipeThrough(new TextDecoderStream()).getReader();
      assertEquals((await reader.read()).value, "up\n");
      reader.releaseLock();
      assert(await recordGroup(dir, leader.pid, { run: "ctx-0", agent: "t", step: 0 }));
      const code = `const { reapGroups } = await import("${import.meta.resolve("./groups.ts")}");
        console.log(JSON.stringify(await reapGroups(${JSON.stringify(dir)}, { graceMs: 0 })));`;
      const out = await new Deno.Command("setpriv", {
        args: [`--bounding-set=-all,${INSTANCE_CAPS.map((c) => `+${c}`).join(",")}`]
          .concat(["--inh-caps=-all", "--", Deno.execPath(), "eval", "--quiet", code]),
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert(out.success, new TextDecoder().decode(out.stderr));
      const r = JSON.parse(new TextDecoder().decode(out.stdout));
      assertEquals(r, { stopped: [leader.pid], stale: [], unchecked: [] });
      // Bounded: without the signal the leader sleeps its 600 s.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const hung = new Promise<"hung">((r) => timer = setTimeout(() => r("hung"), 30_000));
      const end = await Promise.race([leader.status.then((s) => s.signal), hung]);
      clearTimeout(timer);
      assertEquals(end, "SIGKILL");
    } finally {
      try {
        leader.kill("SIGKILL");
      } catch (e) {
        ignore(e, TypeError); /* ended */
      }
      await leader.stdout.cancel().catch(() => {});
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
