/** Issue 24 item 13: a connection to an idle agent's socket by a uid its instance would refuse starts no instance (the host accepts it, applies the owner rule, answers EACCES and closes); the owner's connection after it starts the instance and is served. */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../assert.ts";
import { MAX_INSTANCES_PER_UID } from "../../src/host/supervisor.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { DENO, Raw, run, type Target, type Tree, until, withTarget } from "../fixture/mod.ts";

const CLIENT = new URL("./peer_client.ts", import.meta.url).pathname;
const OWNER = 1000, OTHER = 1001;
/** Refused connections in the flood (one client process, one connection each). */
const FLOOD = 40;

/** What peer_client.ts prints for one connection. */
interface Answer {
  frames: Record<string, unknown>[];
  closed: boolean;
}

/** peer_client.ts as `uid` on `<run>/agent/mine.sock`, one connection per frame. */
async function client(t: Target, uid: number, frames: unknown[]): Promise<Answer[]> {
  const dir = `${t.tree.dir}/deno-${uid}`;
  const r = await run(
    [
      DENO,
      "run",
      "-A",
      "--no-config",
      CLIENT,
      `${t.tree.run}/agent/mine.sock`,
      ...frames.map((f) => JSON.stringify(f)),
    ],
    { uid, env: { DENO_DIR: dir, HOME: dir }, ms: 60_000 },
  );
  assertEquals(r.code, 0, `peer_client as ${uid}: ${r.stdout} ${r.stderr}`);
  return r.stdout.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

/** Agent `mine` owned by uid 1000, and a Deno dir for each client uid. */
function setup(tree: Tree): void {
  Deno.chmodSync(tree.dir, 0o755);
  createAgent(tree.root, "mine", { uid: OWNER, gid: OWNER });
  for (const uid of [OWNER, OTHER]) {
    Deno.mkdirSync(`${tree.dir}/deno-${uid}`, { mode: 0o755 });
    Deno.chownSync(`${tree.dir}/deno-${uid}`, uid, uid);
  }
}

/** The agents `ps` lists (their instance or a terminal lives). */
async function live(t: Target): Promise<string[]> {
  const ps = await t.ctx(["agent", "ps", "--json"]);
  assertEquals(ps.code, 0, ps.stderr);
  const frame = JSON.parse(ps.stdout.trim().split("\n").find((l) => l.startsWith("{")) ?? "{}");
  return frame.instances.map((i: { agent: string }) => i.agent);
}

/** True while `mine` has an instance receipt (made before its instance is released). */
function receipt(t: Target): boolean {
  try {
    Deno.statSync(`${t.tree.run}/instance/mine.json`);
    return true;
  } catch {
    return false;
  }
}

Deno.test("a connection by a uid the owner rule refuses starts no instance: the host answers EACCES and closes (a flood of them too); the owner's connection then starts it and is served; the mount answers during and after", async () => {
  await withTarget(async (t) => {
    const send = (id: string) => ({ op: "send", id, session: "s", input: "hello" });
    const [refused] = await Promise.all([
      client(t, OTHER, [...Array(FLOOD).keys()].map((i) => send(`x${i}`))),
      t.bystander(),
    ]);
    // Every connection was answered: one EACCES frame (the instance's own answer), then a close.
    assertEquals(refused.length, FLOOD);
    for (const a of refused) {
      assertEquals(a.frames.map((f) => [f.type, f.code]), [["error", "EACCES"]]);
      assertMatch(String(a.frames[0].message), /^peer uid 1001 is neither the owner \(1000\)/);
      assert(a.closed, "the refused connection stayed open");
    }
    // The refusals have all come: nothing was started for them.
    assertEquals(await live(t), []);
    assertEquals(receipt(t), false, "an instance receipt was made for a refused peer");
    await t.bystander();

    // The owner is served as before: its connection starts the instance, which answers it.
    const served = await client(t, OWNER, [send("own")]);
    assertEquals(served.map((a) => [a.frames.at(-1)?.type, a.frames.at(-1)?.status]), [[
      "done",
      "ok",
    ]]);
    assertEquals(await live(t), ["mine"]);
    // Once it runs, it accepts (and refuses) by itself, exactly as before.
    const again = await client(t, OTHER, [send("y")]);
    assertEquals(again[0].frames.map((f) => [f.type, f.code]), [["error", "EACCES"]]);
    assertEquals(await live(t), ["mine"]);
    await t.bystander();
  }, { setup });
});

Deno.test("an admitted connection that never speaks starts the instance without holding the host: it is handed over and served once it speaks; the owner is served meanwhile", async () => {
  await withTarget(async (t) => {
    // Root is admitted by the owner rule: its silent connection starts the instance.
    const silent = await Raw.connect(`${t.tree.run}/agent/mine.sock`);
    try {
      await until(async () => (await live(t)).includes("mine"), "the instance started", 60_000);
      await t.bystander();
      const served = await client(t, OWNER, [{ op: "send", id: "own", session: "o", input: "hi" }]);
      assertEquals(served.map((a) => a.frames.at(-1)?.type), ["done"]);
      // The handed connection is the instance's now: its first frame is served like any other.
      silent.write({ op: "send", id: "late", session: "r", input: "late" });
      const frames = await silent.run();
      assertEquals(frames.at(-1)?.status, "ok");
    } finally {
      silent.close();
    }
    await t.bystander();
  }, { setup });
});

/**
 * Connects as `uid` to each of `agents`' sockets in turn, one frame each, and returns the first
 * frame of each answer: a deno script of its own in the tree (the client's cwd is the tree dir).
 */
async function firstFrames(
  t: Target,
  uid: number,
  agents: string[],
): Promise<Record<string, unknown>[]> {
  const script = `${t.tree.dir}/first.ts`;
  Deno.writeTextFileSync(
    script,
    `for (const path of Deno.args) {
  const c = await Deno.connect({ transport: "unix", path });
  await c.write(new TextEncoder().encode(JSON.stringify({ op: "resume", session: "none" }) + "\\n")).catch(() => {});
  let text = "";
  const buf = new Uint8Array(65536);
  while (!text.includes("\\n")) {
    const n = await c.read(buf).catch(() => null);
    if (n === null) break;
    text += new TextDecoder().decode(buf.subarray(0, n));
  }
  c.close();
  console.log(text.split("\\n")[0] || "{}");
}
`,
  );
  Deno.chmodSync(script, 0o644);
  const dir = `${t.tree.dir}/deno-${uid}`;
  const r = await run(
    [
      DENO,
      "run",
      "-A",
      "--no-config",
      script,
      ...agents.map((a) => `${t.tree.run}/agent/${a}.sock`),
    ],
    { uid, env: uid === 0 ? {} : { DENO_DIR: dir, HOME: dir }, ms: 300_000 },
  );
  assertEquals(r.code, 0, `client as ${uid}: ${r.stdout} ${r.stderr}`);
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l));
}

Deno.test("a uid's agent instances are bounded (MAX_INSTANCES_PER_UID): one more, by a connection or a control.sock start, is refused EAGAIN and starts nothing; root still starts it; the mount answers", async () => {
  const N = MAX_INSTANCES_PER_UID;
  const names = [...Array(N + 1).keys()].map((i) => `a${i}`);
  await withTarget(async (t) => {
    const mine = names.slice(0, N), over = names[N];
    const [first] = await Promise.all([firstFrames(t, OWNER, mine), t.bystander()]);
    // Each was served by its instance (a resume of a session that does not exist: ENOENT).
    for (const f of first) assert(f.code !== "EAGAIN" && f.code !== "EACCES", JSON.stringify(f));
    assertEquals((await live(t)).sort(), mine.toSorted());
    const [refused] = await firstFrames(t, OWNER, [over]);
    assertEquals([refused.type, refused.code], ["error", "EAGAIN"]);
    const start = await t.ctx(["agent", "start", over, "--json"], { uid: OWNER });
    assert(start.code !== 0, `the start over the cap succeeded: ${start.stdout}`);
    assertStringIncludes(start.stdout + start.stderr, "EAGAIN");
    assertEquals((await live(t)).includes(over), false);
    await t.bystander();
    // Root is not bounded: its connection starts the agent's instance.
    const root = await firstFrames(t, 0, [over]);
    assert(root[0].code !== "EAGAIN", JSON.stringify(root[0]));
    assertEquals((await live(t)).includes(over), true);
    await t.bystander();
  }, {
    setup: (tree) => {
      setup(tree);
      for (const n of names) createAgent(tree.root, n, { uid: OWNER, gid: OWNER });
    },
  });
});
