/** Process roles with real parts: cortexfsd as host, one instance process per agent, receipts, ctx agent start/stop/status/ps, real bwrap steps. */
import { assert, assertEquals } from "../assert.ts";
import {
  AGENT_SH,
  cleanup,
  type CtxOn,
  ctxOn,
  type Daemon,
  gone,
  makeTree,
  nobodyDenoDir,
  type Peer,
  receiptAt,
  sh,
  startDaemon,
  startPeer,
  type Tree,
  until,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { readRecords } from "../../src/store/jsonl.ts";
import { startTime } from "../../src/sandbox/receipt.ts";
import type { InstanceReceipt } from "../../src/host/receipt.ts";

const root = Deno.uid() === 0;

type Receipt = InstanceReceipt;

const read = (p: string) => Deno.readTextFileSync(p);
const control = (tree: Tree, agent: string, f: string) =>
  read(`${tree.root}/agent/${agent}.d/${f}`);
const receiptPath = (tree: Tree, agent: string) => `${tree.run}/instance/${agent}.json`;
const receipt = (tree: Tree, agent: string) => receiptAt(receiptPath(tree, agent));

/** `ctx ARGS` on the tree's mount. */
const ctxOf = (tree: Tree) => (args: string[], o: CtxOn = {}) => ctxOn(tree, args, o);

/** A tree with agent `t` (the test executable agent, root's) and its log dir. */
async function treeWithT(): Promise<Tree> {
  const tree = await makeTree();
  createAgent(tree.root, "t", { uid: 0, gid: 0, exec: AGENT_SH });
  Deno.writeTextFileSync(`${tree.root}/agent/t.d/env`, `LOG_DIR=${tree.logs}\n`);
  return tree;
}

async function daemon(tree: Tree, idle = 300): Promise<Daemon> {
  return await startDaemon(tree, { args: ["--idle-timeout", String(idle)] });
}

/** A client sending "sleep" to `t` in session default; resolves once the agent says it sleeps. */
async function sleeper(tree: Tree, id: string): Promise<Peer> {
  const p = startPeer(`${tree.run}/agent/t.sock`, {
    op: "send",
    id,
    session: "default",
    input: "sleep",
  });
  const seen = await p.waitFor("sleeping");
  assert(seen.includes("sleeping"), seen);
  return p;
}

/** The frames of the run a client id started in `t`'s default session. */
function runFrames(tree: Tree, clientId: string): Record<string, unknown>[] {
  const events = readRecords(
    `${tree.root}/home/0/agent/t/session/default/events.jsonl`,
  ) as Record<string, unknown>[];
  const run = events.find((e) => e.type === "start" && e.client_id === clientId)?.run;
  return events.filter((e) => e.run === run);
}

Deno.test({
  name:
    "kill -9 of one agent's instance: the mount and other agents keep serving; the next send starts a new instance and the run reads interrupted (EINTR)",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    let d: Daemon | null = null;
    try {
      d = await daemon(tree);
      const ctx = ctxOf(tree);
      const s = await sleeper(tree, "k-1");
      const first = receipt(tree, "t") as Receipt;
      assertEquals(control(tree, "t", "status"), "busy\n");
      // A hung instance (stopped mid-run) holds up nobody else: the mount and coder answer.
      Deno.kill(first.pid, "SIGSTOP");
      assertEquals((await sh(`stat -c %F ${tree.mount}/status`)).code, 0);
      const meanwhile = await ctx(["agent", "send", "coder", "while", "t", "hangs"]);
      assertEquals([meanwhile.code, meanwhile.stdout], [0, "while t hangs\n"]);
      Deno.kill(first.pid, "SIGKILL");
      // The host sees the exit: failed (dead), pid cleared, receipt gone.
      // The receipt goes last (supervisor.ts): once it is gone the exit is fully recorded.
      await until(() => receipt(tree, "t") === null, "the host to record the crash");
      assertEquals([control(tree, "t", "status"), control(tree, "t", "pid")], ["dead\n", ""]);
      await s.end();
      // The mount answers, and another agent (its own instance) serves.
      assertEquals((await sh(`stat -c %F ${tree.mount}/status`)).code, 0);
      const other = await ctx(["agent", "send", "coder", "still", "here"]);
      assertEquals([other.code, other.stdout], [0, "still here\n"]);
      // The next send to t starts a new instance, whose recovery closed the killed run.
      const next = await ctx(["agent", "send", "t", "echo", "again"]);
      assertEquals([next.code, next.stdout.includes("again")], [0, true]);
      const second = receipt(tree, "t") as Receipt;
      assert(second.pid !== first.pid && second.invocation !== first.invocation);
      const frames = runFrames(tree, "k-1");
      assertEquals(frames.slice(-2).map((e) => [e.type, e.code ?? e.status]), [
        ["error", "EINTR"],
        ["done", "error"],
      ]);
      const log = control(tree, "t", "log");
      assert(log.includes(`instance t pid ${first.pid} exited (signal SIGKILL): failed`), log);
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "ctx agent stop of a busy agent ends its run cancelled (durably), clears pid, says idle; start is idempotent; the socket starts it again",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    let d: Daemon | null = null;
    try {
      d = await daemon(tree);
      const ctx = ctxOf(tree);
      const started = await ctx(["agent", "start", "t"]);
      const r1 = receipt(tree, "t") as Receipt;
      assertEquals([started.code, started.stdout.startsWith("started t unit=cortexfs-agent-t")], [
        0,
        true,
      ]);
      const again = await ctx(["agent", "start", "t"]);
      assertEquals([again.code, again.stdout.startsWith("running t")], [0, true]);
      assertEquals((receipt(tree, "t") as Receipt).invocation, r1.invocation); // not doubled
      const s = await sleeper(tree, "c-1");
      const stop = await ctx(["agent", "stop", "t"]);
      assertEquals(
        // The session's terminal (ctx agent start made it) first, then the instance.
        [
          stop.code,
          /^stopped terminal id=\S+ session=default pid=\d+ \(exited\)\nstopped t \(exited\)/.test(
            stop.stdout,
          ),
        ],
        [0, true],
        stop.stdout + stop.stderr,
      );
      await s.end();
      assert(gone(r1.pid));
      const frames = runFrames(tree, "c-1");
      assertEquals(frames.map((e) => e.type).includes("cancel"), true);
      assertEquals(frames.at(-1)?.type, "done");
      assertEquals(frames.at(-1)?.status, "cancelled");
      assertEquals(read(`${tree.root}/home/0/agent/t/session/default/state`), "cancelled\n");
      assertEquals([control(tree, "t", "status"), control(tree, "t", "pid")], ["idle\n", ""]);
      const meta = JSON.parse(control(tree, "t", "meta.json"));
      assertEquals([meta.receipt.invocation, meta.receipt.exit.code], [r1.invocation, 0]);
      const none = await ctx(["agent", "stop", "t"]);
      assertEquals([none.code, none.stdout], [0, "t: no instance\n"]);
      // A stopped agent's socket still works: the next connection starts a new instance.
      const next = await ctx(["agent", "send", "t", "echo", "back"]);
      assertEquals([next.code, next.stdout.includes("back")], [0, true]);
      assert((receipt(tree, "t") as Receipt).invocation !== r1.invocation);
    } finally {
      await cleanup(tree, d);
    }
  },
});

/** Socket inode -> bound path, from /proc/net/unix (listening sockets have their path there). */
function unixPaths(): Map<number, string> {
  const out = new Map<number, string>();
  for (const line of read("/proc/net/unix").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 8) out.set(Number(f[6]), f[7]);
  }
  return out;
}

Deno.test({
  name:
    "a live instance: meta.json, pid and status match ps and /proc; ctx agent status/ps and ctx status show it; its fds are only its own; only root or the owner stop it",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    let d: Daemon | null = null;
    const denoDir = nobodyDenoDir(65534);
    try {
      d = await daemon(tree);
      const ctx = ctxOf(tree);
      assertEquals((await ctx(["agent", "start", "coder"])).code, 0);
      const r = receipt(tree, "coder") as Receipt;
      const meta = JSON.parse(control(tree, "coder", "meta.json")).receipt;
      assertEquals(meta, r);
      assertEquals([control(tree, "coder", "status"), control(tree, "coder", "pid")], [
        "ready\n",
        `${r.pid}\n`,
      ]);
      const ps = await sh(`ps -o pid=,pgid=,sid=,ppid=,uid= -p ${r.pid}`);
      const [pid, pgid, sid, ppid, uid] = ps.stdout.trim().split(/\s+/).map(Number);
      // Its own session and group (setsid), a child of the host, root's.
      assertEquals([pid, pgid, sid, ppid, uid], [r.pid, r.pid, r.pid, d.child.pid, r.uid]);
      assertEquals(r.pgid, r.pid);
      assertEquals(startTime(r.pid), r.start_time);
      assertEquals(r.boot_id, read("/proc/sys/kernel/random/boot_id").trim());
      assertEquals(r.unit, "cortexfs-agent-coder");
      const started =
        `agent.start unit=cortexfs-agent-coder invocation=${r.invocation} pid=${r.pid}`;
      assert(control(tree, "coder", "log").includes(started), control(tree, "coder", "log"));
      assert(/^[0-9a-f]{32}$/.test(r.invocation));

      const status = await ctx(["agent", "status", "coder"]);
      assertEquals(status.stdout.split("\n")[0], "ready");
      assert(status.stdout.includes(`invocation=${r.invocation} pid=${r.pid}`), status.stdout);
      const list = await ctx(["agent", "ps"]);
      assertEquals(
        list.stdout.split("\n\n")[0],
        `AGENT\tSTATE\tPID\tUNIT\tINVOCATION\ncoder\tready\t${r.pid}\tcortexfs-agent-coder\t${r.invocation}`,
      );
      // ctx agent start made the session's terminal too: its own table.
      assert(
        /\n\nTERMINAL\tAGENT\tSESSION\tSTATE\tPID\tUNIT\nt-\S+\tcoder\tdefault\trunning\t\d+\tcortexfs-term-coder-default\n$/
          .test(list.stdout),
        list.stdout,
      );
      const top = await ctx(["status"]);
      assert(top.stdout.includes(`instance=coder state=ready pid=${r.pid}\n`), top.stdout);

      // Its fds: stdio pipes, its own listening socket (and accepted ones), Deno's own files; no
      // other agent's socket, no host control socket, no /dev/fuse.
      const paths = unixPaths();
      const links: string[] = [];
      for (const e of Deno.readDirSync(`/proc/${r.pid}/fd`)) {
        try {
          links.push(Deno.readLinkSync(`/proc/${r.pid}/fd/${e.name}`));
        } catch { /* closed meanwhile */ }
      }
      const bound = links.flatMap((l) => {
        const m = /^socket:\[(\d+)\]$/.exec(l);
        const p = m ? paths.get(Number(m[1])) : undefined;
        return p ? [p] : [];
      });
      assertEquals([...new Set(bound)], [`${tree.run}/agent/coder.sock`]);
      // fd 4: its end of the host's socketpair (unnamed, so not among those), close-on-exec.
      const four = Deno.readLinkSync(`/proc/${r.pid}/fd/4`);
      const m4 = /^socket:\[(\d+)\]$/.exec(four);
      const flags = /^flags:\s+(\d+)$/m.exec(read(`/proc/${r.pid}/fdinfo/4`))?.[1];
      assertEquals([
        m4 !== null,
        paths.has(Number(m4?.[1])),
        (parseInt(flags ?? "0", 8) & 0o2000000) !== 0,
      ], [
        true,
        false,
        true,
      ]);
      // Files: its own run index and Deno's caches; nothing of the host's (no /dev/fuse).
      const cache = /\/(dep_analysis|node_analysis|v8_code)_cache_v\d+(-wal|-shm)?$/;
      const files = links.filter((l) => l.startsWith("/") && l !== "/dev/null" && !cache.test(l));
      const index = `${tree.run}/index/coder.sqlite`;
      assertEquals(files.sort(), [index, `${index}-shm`, `${index}-wal`]);

      // Authority: uid 65534 may read status, but not stop root's agent.
      const peek = await ctx(["agent", "status", "coder"], { as: 65534, denoDir });
      const stop = await ctx(["agent", "stop", "coder"], { as: 65534, denoDir });
      assertEquals([peek.code, stop.code !== 0, stop.stderr.includes("EACCES")], [0, true, true]);
      assertEquals(receipt(tree, "coder")?.invocation, r.invocation); // still running

      const stopped = await ctx(["agent", "stop", "coder"]);
      assertEquals(stopped.code, 0);
      assertEquals([control(tree, "coder", "status"), control(tree, "coder", "pid")], [
        "idle\n",
        "",
      ]);
      assertEquals((await ctx(["agent", "ps"])).stdout, "AGENT\tSTATE\tPID\tUNIT\tINVOCATION\n");
    } finally {
      await cleanup(tree, d);
      Deno.removeSync(denoDir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "idle timeout: an instance with no connection and no run exits; the next connection starts a new one (new pid and invocation)",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      d = await daemon(tree, 1);
      const ctx = ctxOf(tree);
      assertEquals((await ctx(["agent", "send", "coder", "one"])).stdout, "one\n");
      const first = receipt(tree, "coder") as Receipt;
      // The exit event: the host drops the receipt and writes idle.
      await until(() => receipt(tree, "coder") === null, "the idle instance to exit");
      assertEquals([control(tree, "coder", "status"), control(tree, "coder", "pid")], [
        "idle\n",
        "",
      ]);
      assert(gone(first.pid));
      assert(
        control(tree, "coder", "log").includes(`instance coder pid ${first.pid} exited (code 0)`),
      );
      assertEquals((await ctx(["agent", "send", "coder", "two"])).stdout, "two\n");
      const second = receipt(tree, "coder") as Receipt;
      assert(second.pid !== first.pid && second.invocation !== first.invocation);
      // A half-closed client (its request, then EOF) is served to the end, then the instance
      // idles out all the same.
      const left = await sh(
        `'${Deno.execPath()}' eval 'import net from "node:net"; const c = net.connect("${tree.run}/agent/coder.sock"); c.on("connect", () => c.end(JSON.stringify({op:"send",id:"gone-1",session:"default",input:"three"}) + "\\n"))'`,
      );
      assertEquals(left.code, 0);
      const msgs = read(`${tree.root}/home/0/agent/coder/session/default/messages.jsonl`);
      assert(msgs.includes('"three"'), msgs);
      await until(() => receipt(tree, "coder") === null, "the instance to idle out");
      assertEquals(control(tree, "coder", "status"), "idle\n");
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "host start: a forged receipt naming a live process with another start time kills nothing and is cleared",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const victim = new Deno.Command("sleep", { args: ["60"], stdout: "null", stderr: "null" })
      .spawn();
    let d: Daemon | null = null;
    try {
      Deno.mkdirSync(`${tree.run}/instance`, { mode: 0o700 });
      const forged = {
        schema: "cortexfs.instance-receipt/v1",
        unit: "cortexfs-agent-coder",
        invocation: "0".repeat(32),
        agent: "coder",
        pid: victim.pid,
        pgid: victim.pid,
        start_time: String(Number(startTime(victim.pid)) - 1), // the pid, reused
        boot_id: read("/proc/sys/kernel/random/boot_id").trim(),
        uid: 0,
        started_at: 0,
      };
      Deno.writeTextFileSync(receiptPath(tree, "coder"), JSON.stringify(forged) + "\n");
      d = await daemon(tree);
      assertEquals(receipt(tree, "coder"), null); // cleared
      assert(!gone(victim.pid)); // never signalled
      // The host serves as usual.
      const sent = await ctxOf(tree)(["agent", "send", "coder", "fine"]);
      assertEquals([sent.code, sent.stdout], [0, "fine\n"]);
    } finally {
      await cleanup(tree, d);
      victim.kill("SIGKILL");
      await victim.status;
    }
  },
});

Deno.test({
  name:
    "an instance that cannot start: the waiting client gets one EIO frame (no restart loop), the log says why, and the next start after the repair serves",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    let d: Daemon | null = null;
    try {
      // A directory where t's run index goes: the instance fails at its start (EIO).
      Deno.mkdirSync(`${tree.run}/index/t.sqlite`, { recursive: true });
      d = await daemon(tree);
      const ctx = ctxOf(tree);
      const failed = await ctx(["agent", "send", "t", "echo", "x"]);
      assertEquals([failed.code !== 0, failed.stderr.includes("EIO")], [true, true], failed.stderr);
      assert(failed.stderr.includes("its instance could not start"), failed.stderr);
      await until(() => receipt(tree, "t") === null, "the failed state");
      assertEquals([control(tree, "t", "status"), control(tree, "t", "pid")], ["dead\n", ""]);
      assert(control(tree, "t", "log").includes(": failed\n"), control(tree, "t", "log"));
      Deno.removeSync(`${tree.run}/index/t.sqlite`);
      const next = await ctx(["agent", "send", "t", "echo", "fixed"]);
      assertEquals([next.code, next.stdout.includes("fixed")], [0, true], next.stderr);
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "an agent whose socket alias cannot be made is not served; the host starts and every other agent serves",
  ignore: !root,
  async fn() {
    const tree = await treeWithT();
    createAgent(tree.root, "u", { uid: 0, gid: 0, exec: AGENT_SH });
    // agent/u.sock is a non-empty directory: the alias symlink cannot be renamed onto it
    Deno.mkdirSync(`${tree.root}/agent/u.sock/x`, { recursive: true });
    let d: Daemon | null = null;
    try {
      d = await daemon(tree);
      await until(() => d!.log().includes("not serving u"), "the host to say u is not served");
      const ctx = ctxOf(tree);
      const t = await ctx(["agent", "send", "t", "echo", "served"]);
      assertEquals([t.code, t.stdout.includes("served")], [0, true]);
      assertEquals((await sh(`stat -c %F ${tree.mount}/status`)).code, 0);
      let u = false;
      try {
        u = Deno.lstatSync(`${tree.run}/agent/u.sock`).isSocket === true;
      } catch { /* removed again */ }
      assertEquals(u, false, "u's listening socket is closed and removed");
    } finally {
      await cleanup(tree, d);
    }
  },
});
