/**
 * Issue 24 items 4, 9, 14: an executable agent's step with real parts (cortexfsd, its instance,
 * bwrap). Its `env` never reaches an argv another user can read; its tmpfs mounts are bounded; it
 * dies with a SIGKILLed instance. Every wait is for the event, bounded.
 */
import { assert, assertEquals } from "../assert.ts";
import {
  addTestAgent,
  cleanup,
  ctxOn,
  type Daemon,
  gone,
  makeTree,
  receiptAt,
  runPids,
  sh,
  startDaemon,
  startPeer,
  type Target,
  type Tree,
  until,
  withTarget,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { TMPFS } from "../../src/sandbox/profile.ts";
import { groupsDir } from "../../src/runtime/groups.ts";
import type { InstanceReceipt } from "../../src/host/receipt.ts";

const root = Deno.uid() === 0;

/** A tree with agent `t` (the test executable agent, root's, its log dir bound), `env` added. */
async function treeWithT(env: Record<string, string> = {}): Promise<Tree> {
  const tree = await makeTree();
  addTestAgent(tree, "t", { env });
  return tree;
}

/** A uid-65534 stat of the mount's status answers (the bystander of every attack test). */
async function bystander(tree: Tree): Promise<void> {
  const r = await sh(
    `setpriv --reuid=65534 --regid=65534 --clear-groups stat -c %F ${tree.mount}/status`,
  );
  assertEquals(r.code, 0, r.stderr);
}

/** The run id of the step that wrote `<logs>/<run>.leader` (the "sleep" step), once it did. */
async function sleepingRun(tree: Tree): Promise<string> {
  let run = "";
  await until(() => {
    for (const e of Deno.readDirSync(tree.logs)) {
      if (e.name.endsWith(".leader") && Deno.readTextFileSync(`${tree.logs}/${e.name}`) !== "") {
        run = e.name.slice(0, -".leader".length);
        return true;
      }
    }
    return false;
  }, "the sleeping step to record its pids");
  return run;
}

/** The pid `pid` has in its own (innermost) pid namespace (the last field of `NSpid:`). */
function innerPid(pid: number): number {
  try {
    const line = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^NSpid:(.*)$/m)?.[1];
    return Number(line?.trim().split(/\s+/).at(-1) ?? 0);
  } catch {
    return 0;
  }
}

/**
 * The step's processes on the host, once every one it wrote down is listed: its bwrap (the group
 * receipt), and the host pids of the agent and its child (found by their `CTX_RUN_ID`, matched by
 * the pids they have inside, which are what they wrote).
 */
async function stepPids(tree: Tree, run: string): Promise<number[]> {
  const read = (f: string) => Number(Deno.readTextFileSync(`${tree.logs}/${run}.${f}`).trim());
  const want = [read("leader"), read("child")];
  let pids: number[] = [];
  await until(() => {
    let leaders: number[] = [];
    try {
      leaders = [...Deno.readDirSync(groupsDir(tree.run))]
        .map((e) => Number(e.name.replace(/\.json$/, ""))).filter((n) => n > 0 && !gone(n));
    } catch { /* not yet */ }
    const mine = runPids(run).filter((p) => want.includes(innerPid(p)));
    pids = [...leaders, ...mine];
    return leaders.length === 1 && mine.length === want.length;
  }, "the step's bwrap, agent and child to be listed");
  return pids;
}

Deno.test({
  name:
    "item 14: SIGKILL of an agent's instance while a step sleeps takes the step's bwrap, agent and child with it; the mount answers",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { args: ["--idle-timeout", "300"] });
      const p = startPeer(`${tree.run}/agent/t.sock`, {
        op: "send",
        id: "k14",
        session: "default",
        input: "sleep",
      });
      assert((await p.waitFor("sleeping")).includes("sleeping"));
      const run = await sleepingRun(tree);
      const pids = await stepPids(tree, run);
      const inst = receiptAt(`${tree.run}/instance/t.json`) as InstanceReceipt;
      Deno.kill(inst.pid, "SIGKILL");
      await until(() => pids.every(gone), `the step's processes ${pids} to end with the instance`);
      await bystander(tree);
      await p.end();
    } finally {
      await cleanup(tree, d);
    }
  },
});

/** Every /proc/<pid>/cmdline and environ uid 65534 can read while the step runs, concatenated. */
async function readableAsNobody(): Promise<string> {
  // The scanner's own argv names no secret: the test alone holds it, and looks for it after.
  const r = await sh(
    `setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do cat "$f" 2>/dev/null; echo; done'`,
  );
  assertEquals(r.code, 0, r.stderr);
  return r.stdout;
}

Deno.test({
  name:
    "item 4: an executable agent's env value is on no argv (uid 65534 scans every /proc/*/cmdline and environ while the step runs); the step still has it",
  ignore: !root,
  async fn() {
    const secret = `s3cr3t-${crypto.randomUUID()}`;
    const tree = await treeWithT({ T_API_KEY: secret });
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { args: ["--idle-timeout", "300"] });
      const p = startPeer(`${tree.run}/agent/t.sock`, {
        op: "send",
        id: "k4",
        session: "default",
        input: "sleep",
      });
      assert((await p.waitFor("sleeping")).includes("sleeping"));
      const run = await sleepingRun(tree);
      const pids = await stepPids(tree, run); // bwrap, the agent and its child are listed
      const seen = await readableAsNobody();
      assert(seen.includes("cortexfsd"), "the scan read the host's argvs");
      assertEquals(seen.includes(secret), false, "the env secret is readable by uid 65534");
      // The processes were there through the scan (bwrap's argv among them).
      assertEquals(pids.filter(gone), []);
      await bystander(tree);
      // The step got the variable in its environment.
      const env = Deno.readTextFileSync(`${tree.logs}/${run}.0.env`).split("\0");
      assert(env.includes(`T_API_KEY=${secret}`), env.join(" "));
      // Stop the sleeping run (cancelled) rather than wait out its sleep.
      assertEquals((await ctxOn(tree, ["agent", "stop", "t"])).code, 0);
      await p.end();
    } finally {
      await cleanup(tree, d);
    }
  },
});

/** `ctx agent tsh bob --json -- bash SCRIPT` as bob's owner from its workspace: the tool's text. */
async function bobBash(t: Target, script: string): Promise<{ status: string; content: string }> {
  const ran = await t.ctx(["agent", "tsh", "bob", "--json", "--", "bash", script], {
    uid: BOB,
    cwd: `${t.tree.dir}/ws`,
    ms: 60_000,
  });
  const msg = ran.stdout.trim().split("\n").filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l)).find((f) => f.type === "message" && f.role === "tool");
  assert(msg, `no tool message in: ${ran.stdout} ${ran.stderr}`);
  return msg.content[0];
}

const BOB = 1000;

Deno.test("item 9: a tool writing past a sandbox tmpfs (/tmp, /run, /dev/shm) stops at its size with ENOSPC; /dev is read-only; the mount answers", async () => {
  await withTarget(async (t) => {
    // One MiB past each size: the write must stop at the size, whatever RAM the host has.
    const fill = Object.entries(TMPFS).map(([d, n]) =>
      `head -c ${
        n + (1 << 20)
      } /dev/zero >${d}/fill; echo "${d} $? $(stat -c %s ${d}/fill)"; rm -f ${d}/fill`
    ).join("\n");
    const got = await bobBash(t, `${fill}\ntouch /dev/x 2>/dev/null; echo "/dev $?"`);
    const rows = Object.fromEntries(
      got.content.trim().split("\n").map((l) => l.split(" ")).map(([d, ...r]) => [d, r]),
    );
    for (const [d, n] of Object.entries(TMPFS)) {
      const [code, size] = rows[d] ?? [];
      assert(code !== "0", `${d}: the write past ${n} bytes succeeded (${size} bytes)`);
      assert(Number(size) <= n, `${d} holds ${size} bytes, over ${n}`);
    }
    assert(rows["/dev"]?.[0] !== "0", "/dev is writable");
    await t.bystander();
  }, {
    setup: (tree) => {
      createAgent(tree.root, "bob", { uid: BOB, gid: BOB });
      Deno.mkdirSync(`${tree.dir}/ws`, { mode: 0o755 });
      Deno.chownSync(`${tree.dir}/ws`, BOB, BOB);
    },
  });
});
