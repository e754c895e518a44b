/** Agent identity: exact uid/gid/groups for agent processes, owner-made session trees, status/pid. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { addTestAgent, cleanup, ctx, makeTree, Raw, startRuntimeDaemon } from "../fixture/mod.ts";

const root = Deno.uid() === 0;

function ids(uid: number, gid: number, groups: number[]): string {
  // Inside the sandbox's user namespace supplementary groups are unmapped: shown as the overflow
  // id (65534), one per group; what they grant is checked below with files.
  const g = groups.length ? ` ${groups.map(() => 65534).join(" ")}` : "";
  return `Uid: ${uid} ${uid} ${uid} ${uid} Gid: ${gid} ${gid} ${gid} ${gid} Groups:${g}`;
}

Deno.test({
  name: "executable agents run with exactly the agent's uid, gid and groups, also when they are 0",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    Deno.chmodSync(f.dir, 0o755); // uid 1000 must reach its program in the tree
    Deno.chmodSync(f.logs, 0o777);
    const agents: [string, number, number, number[]][] = [
      ["zero", 0, 0, []],
      ["gidzero", 1000, 0, []],
      ["grouped", 1000, 1000, [1001, 1002]],
    ];
    for (const [name, uid, gid, groups] of agents) {
      addTestAgent(f, name);
      const d = `${f.root}/agent/${name}.d`;
      replaceFile(`${d}/uid`, `${uid}\n`);
      replaceFile(`${d}/gid`, `${gid}\n`);
      replaceFile(`${d}/groups`, groups.map((g) => `${g}\n`).join(""));
    }
    // The daemon has supplementary groups of its own: none may reach an agent.
    const d = await startRuntimeDaemon(f, { wrap: ["setpriv", "--groups=4,27", "--"] });
    try {
      const seen: Record<string, unknown> = {};
      for (const [name] of agents) {
        const out = await ctx(f, ["agent", "send", name, "ids"]);
        seen[name] = { code: out.code, out: out.stdout.trim() };
      }
      assertEquals(
        seen,
        Object.fromEntries(
          agents.map(([n, u, g, gs]) => [n, { code: 0, out: ids(u, g, gs) }]),
        ),
      );
      // The groups in force are exactly the agent's: 1001 opens a group-1001 file, and the
      // daemon's own group 27 opens nothing.
      const groupFile = (gid: number) => {
        const p = `${f.logs}/g${gid}`;
        Deno.writeTextFileSync(p, "x\n");
        Deno.chownSync(p, 0, gid);
        Deno.chmodSync(p, 0o640);
        return p;
      };
      const canRead = async (p: string) =>
        (await ctx(f, ["agent", "send", "grouped", `canread ${p}`])).stdout.trim();
      assertEquals([await canRead(groupFile(1001)), await canRead(groupFile(27))], ["yes", "no"]);
      // The uid 1000 agents' sessions were made as that identity: home/1000 given to it by root,
      // everything below created by it (no chown).
      const st = (p: string) => {
        const s = Deno.lstatSync(`${f.root}/${p}`);
        return [s.uid, s.gid, (s.mode ?? 0) & 0o7777];
      };
      assertEquals(
        [
          "home/1000",
          "home/1000/agent/grouped",
          "home/1000/agent/grouped/session/default",
          "home/1000/agent/grouped/session/default/events.jsonl",
          "home/1000/agent/gidzero/session/default/state",
        ].map(st),
        [[1000, 0], [1000, 1000, 0o700], [1000, 1000, 0o700], [1000, 1000, 0o600], [
          1000,
          0,
          0o600,
        ]].map((x) => x.length === 2 ? [...x, 0o700] : x),
      );
    } finally {
      await d.stop();
      await cleanup(f);
    }
  },
});

Deno.test("agent/<n>.d/status and pid: idle while served with no instance, ready with the instance's pid once it serves, busy during a run, dead after", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const read = () => {
    const r = (c: string) => Deno.readTextFileSync(`${f.root}/agent/t.d/${c}`);
    return { status: r("status"), pid: r("pid") };
  };
  const before = read();
  const d = await startRuntimeDaemon(f);
  try {
    const served = read(); // the host serves the socket; no instance runs until a client comes
    const c = await Raw.connect(`${f.root}/agent/t.sock`);
    c.write({ op: "send", id: "slow-1", input: "slow" });
    await c.until((fs) => fs.some((x) => x.type === "start"));
    const busy = read();
    const pid = `${d.instancePid("t")}\n`;
    await c.run();
    c.close();
    const after = read();
    assertEquals({ before, served, busy, after }, {
      before: { status: "dead\n", pid: "" },
      served: { status: "idle\n", pid: "" },
      busy: { status: "busy\n", pid },
      after: { status: "ready\n", pid },
    });
  } finally {
    await d.stop();
  }
  try {
    const mode = (Deno.statSync(`${f.root}/agent/t.d/status`).mode ?? 0) & 0o777;
    assertEquals({ ...read(), mode }, { status: "dead\n", pid: "", mode: 0o644 }); // the mode it was created with
  } finally {
    await cleanup(f);
  }
});

Deno.test("a torn history tail isolates that session only: startup reports it, requests to it answer EIO, nothing is repaired", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  let d = await startRuntimeDaemon(f);
  try {
    assertEquals((await ctx(f, ["agent", "send", "t", "echo", "one"])).code, 0);
    assertEquals((await ctx(f, ["agent", "send", "t", "--session", "b", "echo", "two"])).code, 0);
    await d.stop();
    const dir = `${f.root}/home/0/agent/t/session/default`;
    const torn = Deno.readTextFileSync(`${dir}/events.jsonl`) + '{"type":"start","run":"ctx-';
    Deno.writeTextFileSync(`${dir}/events.jsonl`, torn);
    d = await startRuntimeDaemon(f);
    assertEquals((await d.started("t")).broken, [{
      dir,
      errno: "EIO",
      message: "history ends without a newline (truncated record)",
    }]);
    assertEquals(d.agents(), ["coder", "t"]);
    const bad = await ctx(f, ["agent", "send", "t", "--session", "default", "echo", "three"]);
    assertEquals(bad.code !== 0, true);
    assert(bad.stderr.includes("EIO") && bad.stderr.includes(dir), bad.stderr);
    const resume = await ctx(f, ["agent", "resume", "t", "--session", "default"]);
    assert(resume.code !== 0 && resume.stderr.includes(dir), resume.stderr);
    assertEquals(Deno.readTextFileSync(`${dir}/events.jsonl`), torn);
    // The other session of the same agent, and every other agent, are served.
    const ok = await ctx(f, ["agent", "send", "t", "--session", "b", "echo", "four"]);
    const coder = await ctx(f, ["agent", "send", "coder", "still", "here"]);
    assertEquals([ok.code, coder.code, coder.stdout], [0, 0, "still here\n"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
