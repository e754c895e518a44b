/** The root daemon never acts on a user's behalf with root's authority: real cortexfsd, real uid 1000. */
import { assert, assertEquals } from "../assert.ts";
import {
  AGENT_SH,
  cleanup,
  ctxOn,
  type Daemon,
  gone,
  makeTree,
  nobodyDenoDir,
  PEER,
  sh,
  startDaemon,
  startPeer,
  type Tree,
  until,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { readRecords } from "../../src/store/jsonl.ts";

const root = Deno.uid() === 0;

const USER = 1000;

/** `ctx ARGS` through the mount, as root or (with `as`) as another uid. */
function client(tree: Tree, denoDir: string) {
  return (args: string[], as?: number) =>
    ctxOn(tree, args, as === undefined ? {} : { as, denoDir });
}

Deno.test({
  name: "a uid's symlinks in its own session reach nothing of root's: send and resume fail closed",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const denoDir = nobodyDenoDir(USER);
    let d: Daemon | null = null;
    try {
      createAgent(tree.root, "bob", { uid: USER, gid: USER });
      const secret = `${tree.dir}/root-secret`;
      Deno.writeTextFileSync(secret, "ROOT ONLY\n", { mode: 0o600 });
      const secretBefore = Deno.statSync(secret).mtime?.getTime();
      d = await startDaemon(tree);
      const ctx = client(tree, denoDir);

      const rootRun = await ctx(["agent", "send", "coder", "root private history"]);
      const bobRun = await ctx(["agent", "send", "bob", "hello from bob"], USER);
      assertEquals([rootRun.code, bobRun.code, bobRun.stdout], [0, 0, "hello from bob\n"]);
      // home/1000 belongs to the uid (so it can write there through the mount); below it, the
      // runtime created everything as the uid.
      const own = (p: string) => {
        const s = Deno.lstatSync(`${tree.root}/${p}`);
        return [s.uid, s.gid, (s.mode ?? 0) & 0o7777];
      };
      const session = "home/1000/agent/bob/session/default";
      assertEquals(
        ["home/1000/agent/bob", session, `${session}/messages.jsonl`].map(own),
        [[USER, USER, 0o700], [USER, USER, 0o700], [USER, USER, 0o600]],
      );
      assertEquals(own("home/1000").slice(0, 2), [USER, USER]);
      const touch = await sh(`touch '${tree.mount}/home/1000/x' && echo ok`, { uid: USER });
      assertEquals(touch.stdout, "ok\n");

      // 1. messages.jsonl -> a root-owned 0600 file: refused (EIO, never followed) before any run.
      const plant = (target: string, name = "messages.jsonl") =>
        sh(`cd '${tree.root}/${session}' && rm -f ${name} && ln -s '${target}' ${name}`, {
          uid: USER,
        });
      assertEquals((await plant(secret)).code, 0);
      const send = await ctx(["agent", "send", "bob", "x", "--json"], USER);
      const frames = send.stdout.trim().split("\n").map((l) => JSON.parse(l));
      assertEquals(frames.map((f) => [f.type, f.code]), [["error", "EIO"]]);
      assertEquals(send.code !== 0, true);
      assertEquals(Deno.readTextFileSync(secret), "ROOT ONLY\n");
      assertEquals(Deno.statSync(secret).mtime?.getTime(), secretBefore);

      // 2. messages.jsonl -> root's own history: resume prints none of it, for uid 1000 and
      //    for root alike (the daemon reads bob's session as bob, whoever asks).
      const rootHistory = `${tree.root}/home/0/agent/coder/session/default/messages.jsonl`;
      assertEquals((await plant(rootHistory)).code, 0);
      for (const as of [USER, undefined]) {
        const resume = await ctx(["agent", "resume", "bob", "--session", "default"], as);
        assert(!resume.stdout.includes("root private history"), resume.stdout);
        assertEquals(resume.code !== 0, true);
        assertStderr(resume.stderr, "EIO");
      }

      // 3. events.jsonl -> root's events: a restart must not index root's runs under bob's
      //    session (a replayed request id would stream root's frames to uid 1000).
      const rootEvents = `${tree.root}/home/0/agent/coder/session/default/events.jsonl`;
      const rootStart = (readRecords(rootEvents) as { type: string; client_id?: string }[])
        .find((e) => e.type === "start");
      assertEquals((await plant(rootEvents, "events.jsonl")).code, 0);
      assertEquals(await d.stop(), 0);
      d = await startDaemon(tree);
      const dir = `${tree.root}/${session}`;
      const replay = await sh(
        `'${Deno.execPath()}' run -A --no-config '${PEER}' '${tree.mount}/agent/bob.sock' '${
          JSON.stringify({
            op: "send",
            id: rootStart?.client_id,
            session: "default",
            input: "root private history",
          })
        }'`,
        { uid: USER, cwd: tree.dir },
      );
      assert(!replay.stdout.includes("root private history"), replay.stdout);
      // bob's own instance (started by that connection) skipped the session, in bob's log.
      const bobLog = Deno.readTextFileSync(`${tree.root}/agent/bob.d/log`);
      assert(bobLog.includes(`skipping ${dir}: EIO`), bobLog);
      const answer = replay.stdout.trim().split("\n").map((l) => JSON.parse(l));
      assertEquals(answer.map((f) => f.code), ["EIO"]);
      assert(answer[0].message.includes(dir), answer[0].message);

      // Normal runs still work for root's agent and for uid 1000's other sessions.
      const again = await ctx(["agent", "send", "coder", "still root"]);
      const other = await ctx(["agent", "send", "bob", "--session", "s2", "bob again"], USER);
      assertEquals([again.code, again.stdout, other.code, other.stdout], [
        0,
        "still root\n",
        0,
        "bob again\n",
      ]);
    } finally {
      await cleanup(tree, d);
      Deno.removeSync(denoDir, { recursive: true });
    }
  },
});

function assertStderr(stderr: string, errno: string) {
  assert(stderr.includes(errno), `expected ${errno} in: ${stderr}`);
}

/** Kills cortexfsd with SIGKILL and lazily unmounts what it left (ENOTCONN until then). */
async function kill9(d: Daemon, tree: Tree): Promise<void> {
  d.child.kill("SIGKILL");
  await d.stop();
  await new Deno.Command("umount", { args: ["-l", tree.mount] }).output();
}

Deno.test({
  name:
    "kill -9 of cortexfsd mid-run: both JSONL files parse, the run is closed as interrupted, the restart serves",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      createAgent(tree.root, "t", { uid: 0, gid: 0, exec: AGENT_SH });
      Deno.writeTextFileSync(`${tree.root}/agent/t.d/env`, `LOG_DIR=${tree.logs}\n`);
      d = await startDaemon(tree);
      const status = () => Deno.readTextFileSync(`${tree.root}/agent/t.d/status`);
      assertEquals(status(), "idle\n"); // served; its instance starts with the first connection
      const ctx = client(tree, "");
      // A run that sleeps inside the agent, streaming one delta first.
      const peer = startPeer(`${tree.run}/agent/t.sock`, {
        op: "send",
        id: "k-1",
        session: "default",
        input: "sleep",
      });
      const seen = await peer.waitFor("sleeping");
      assertEquals([seen.includes("sleeping"), status()], [true, "busy\n"]);
      const receipt = JSON.parse(Deno.readTextFileSync(`${tree.run}/instance/t.json`));
      await kill9(d, tree);
      d = null;
      await peer.end();
      // The instance sees its host go (stdin EOF), records the run as interrupted and exits.
      await until(() => gone(receipt.pid), "the orphaned instance to exit");
      // Nothing serves t until a host starts again.
      assertEquals([status(), Deno.readTextFileSync(`${tree.root}/agent/t.d/pid`)], ["dead\n", ""]);

      d = await startDaemon(tree);
      assertEquals(status(), "idle\n");
      const dir = `${tree.root}/home/0/agent/t/session/default`;
      const events = readRecords(`${dir}/events.jsonl`) as Record<string, unknown>[];
      const messages = readRecords(`${dir}/messages.jsonl`) as Record<string, unknown>[];
      assertEquals(events.slice(-2).map((e) => [e.type, e.code ?? e.status]), [
        ["error", "EINTR"],
        ["done", "error"],
      ]);
      assertEquals(messages.map((m) => m.role), ["user"]);
      assertEquals(Deno.readTextFileSync(`${dir}/state`), "error\n");
      const next = await ctx(["agent", "send", "t", "echo", "after", "restart"]);
      assertEquals([next.code, next.stdout.includes("after")], [0, true]);
      assertEquals(await d.stop(), 0);
      d = null;
      assertEquals(
        [status(), Deno.readTextFileSync(`${tree.root}/agent/t.d/pid`)],
        ["dead\n", ""],
      );
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "a torn tail in one user's session does not keep cortexfsd from starting; the rest is served",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const denoDir = nobodyDenoDir(USER);
    let d: Daemon | null = null;
    try {
      createAgent(tree.root, "bob", { uid: USER, gid: USER });
      d = await startDaemon(tree);
      const ctx = client(tree, denoDir);
      assertEquals((await ctx(["agent", "send", "bob", "first"], USER)).code, 0);
      assertEquals(await d.stop(), 0);
      // The user tears its own history (no newline at the end), as uid 1000.
      const dir = `${tree.root}/home/1000/agent/bob/session/default`;
      const cut = await sh(`printf '{"type":"start","run":"ctx-' >> '${dir}/events.jsonl'`, {
        uid: USER,
      });
      assertEquals(cut.code, 0);
      const torn = Deno.readTextFileSync(`${dir}/events.jsonl`);
      d = await startDaemon(tree);
      const coder = await ctx(["agent", "send", "coder", "served"]);
      const other = await ctx(["agent", "send", "bob", "--session", "s2", "other"], USER);
      // bob's instance, started by that send, skipped the torn session (its log says so).
      const bobLog = Deno.readTextFileSync(`${tree.root}/agent/bob.d/log`);
      assert(bobLog.includes(`skipping ${dir}: EIO`), bobLog);
      const broken = await ctx(["agent", "send", "bob", "--session", "default", "x"], USER);
      assertEquals([coder.code, coder.stdout, other.code, other.stdout], [
        0,
        "served\n",
        0,
        "other\n",
      ]);
      assertEquals(broken.code !== 0, true);
      assertStderr(broken.stderr, "EIO");
      assert(broken.stderr.includes(dir), broken.stderr);
      assertEquals(Deno.readTextFileSync(`${dir}/events.jsonl`), torn); // never repaired
    } finally {
      await cleanup(tree, d);
      Deno.removeSync(denoDir, { recursive: true });
    }
  },
});
