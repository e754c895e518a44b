/** `ctx agent start|attach|watch|stop` with real parts: cortexfsd's supervisor starts the session's ctxterm (receipt, bwrap, interactive tsh); a person attaches in tmux; stop ends it by its receipt. */
import { assert, assertEquals } from "../assert.ts";
import {
  cleanup,
  closePane,
  ctxArgv,
  ctxOn,
  type Daemon,
  gone,
  makeTree,
  nobodyDenoDir,
  pane,
  receiptAt,
  startDaemon,
  type Tmux,
  type Tree,
} from "../fixture/mod.ts";
import { parseTerminalEvents } from "../../src/abi/terminal.ts";
import { startTime } from "../../src/sandbox/receipt.ts";
import type { InstanceReceipt } from "../../src/host/receipt.ts";
import { ignore } from "../../src/abi/errno.ts";

const root = Deno.uid() === 0;
/** A terminal unit's receipt: an instance receipt with its session, terminal id and owner. */
type Receipt = Required<InstanceReceipt>;

const read = (p: string) => Deno.readTextFileSync(p);
const receiptPath = (tree: Tree, agent: string, session: string) =>
  `${tree.run}/terminal/${agent}/${session}.json`;
const receipt = (tree: Tree, agent: string, session = "default") =>
  receiptAt(receiptPath(tree, agent, session)) as Receipt | null;

Deno.test({
  name:
    "ctx agent start: the supervisor starts the session's terminal (receipt, sandboxed tsh in the caller's cwd); attach and watch in tmux see `echo hi`; start again reports it; stop ends it by its receipt",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const ws = `${tree.dir}/project`;
    Deno.mkdirSync(`${ws}/.git`, { recursive: true });
    Deno.writeTextFileSync(`${ws}/hello.txt`, "from the workspace\n");
    let d: Daemon | null = null;
    const panes: Tmux[] = [];
    try {
      d = await startDaemon(tree);
      const started = await ctxOn(tree, ["agent", "start", "coder"], { cwd: ws });
      assertEquals(started.code, 0, started.stderr);
      const lines = started.stdout.trim().split("\n");
      assert(lines[0].startsWith("started coder unit=cortexfs-agent-coder"), started.stdout);
      const r = receipt(tree, "coder") as Receipt;
      assert(r, "the terminal's receipt");
      assertEquals(
        [r.schema, r.unit, r.agent, r.session, r.pgid, r.uid, r.owner],
        [
          "cortexfs.instance-receipt/v1",
          "cortexfs-term-coder-default",
          "coder",
          "default",
          r.pid,
          0,
          0,
        ],
      );
      assertEquals(startTime(r.pid), r.start_time);
      assert(
        lines[1].startsWith(`terminal id=${r.terminal} session=default pid=${r.pid} state=running`),
        started.stdout,
      );
      // Its own session and group, a child of the host.
      const ps = new TextDecoder().decode(
        (await new Deno.Command("ps", {
          args: ["-o", "pid=,pgid=,sid=,ppid=", "-p", String(r.pid)],
        })
          .output()).stdout,
      ).trim().split(/\s+/).map(Number);
      assertEquals(ps, [r.pid, r.pid, r.pid, d.child.pid]);
      // It holds none of the host's sockets (agent sockets, control.sock): only its own listener.
      const paths = new Map<number, string>();
      for (const line of read("/proc/net/unix").split("\n").slice(1)) {
        const f = line.trim().split(/\s+/);
        if (f.length >= 8) paths.set(Number(f[6]), f[7]);
      }
      const bound = new Set<string>();
      for (const e of Deno.readDirSync(`/proc/${r.pid}/fd`)) {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(Deno.readLinkSync(`/proc/${r.pid}/fd/${e.name}`));
          const p = m ? paths.get(Number(m[1])) : undefined;
          if (p) bound.add(p);
        } catch (e) {
          ignore(e, Deno.errors.NotFound); /* closed meanwhile */
        }
      }
      assertEquals([...bound], [`${tree.run}/terminal/coder/default/main.sock`]);
      // The live socket under the run dir; the ABI alias in the agent identity's home.
      const sessionDir = `${tree.root}/home/0/agent/coder/session/default`;
      const socket = `${tree.run}/terminal/coder/default/main.sock`;
      assertEquals(Deno.readLinkSync(`${sessionDir}/terminal/main.sock`), socket);
      const dir = `${sessionDir}/terminal/${r.terminal}`;
      const meta = JSON.parse(read(`${dir}/meta.json`));
      assertEquals(
        [meta.id, meta.agent, meta.session, meta.owner, meta.cwd, meta.state, meta.pid],
        [r.terminal, "coder", "default", "0", "/workspace", "running", r.pid],
      );

      // Idempotent: the same terminal is reported, not doubled.
      const again = await ctxOn(tree, ["agent", "start", "coder"], { cwd: ws });
      assertEquals(again.code, 0, again.stderr);
      assert(again.stdout.startsWith("running coder"), again.stdout);
      assert(again.stdout.includes(`terminal id=${r.terminal} session=default pid=${r.pid}`));
      assertEquals(receipt(tree, "coder")?.invocation, r.invocation);

      // status and ps show it.
      const st = await ctxOn(tree, ["agent", "status", "coder"]);
      assert(
        st.stdout.includes(`terminal id=${r.terminal} session=default pid=${r.pid}`),
        st.stdout,
      );
      const list = await ctxOn(tree, ["agent", "ps"]);
      assert(
        list.stdout.includes(
          `TERMINAL\tAGENT\tSESSION\tSTATE\tPID\tUNIT\n${r.terminal}\tcoder\tdefault\trunning\t${r.pid}\tcortexfs-term-coder-default\n`,
        ),
        list.stdout,
      );

      // A person attaches through the mount's ABI alias and types; a watcher sees the same.
      const env = ["env", `CTX_ROOT=${tree.mount}`, "PATH=/usr/bin:/bin", `HOME=${tree.dir}`];
      const a = await pane(tree.dir, "a", [...env, ...ctxArgv(), "agent", "attach", "coder"]);
      panes.push(a);
      await a.wait((s) => s.includes("tsh>"), "the tsh prompt");
      // tsh routes through CTX_PATH (no host `echo`): the bash tool runs it, in the sandbox.
      await a.run("send-keys", "-t", "t", "bash echo hi", "Enter");
      await a.wait((s) => /^hi\s*$/m.test(s), "echo's output");
      const w = await pane(tree.dir, "w", [...env, ...ctxArgv(), "agent", "watch", "coder"]);
      panes.push(w);
      await w.wait(
        (s) => /^hi\s*$/m.test(s) && s.includes("tsh> bash echo hi"),
        "the watcher's screen",
      );
      // The sandbox is the requester's cwd.
      await a.run("send-keys", "-t", "t", "bash cat hello.txt", "Enter");
      await a.wait((s) => s.includes("from the workspace"), "the workspace file");

      // A non-owner may neither start nor stop root's agent (nor its terminal).
      const denoDir = nobodyDenoDir(65534);
      try {
        const s2 = await ctxOn(tree, ["agent", "start", "coder"], {
          as: 65534,
          denoDir,
          cwd: "/tmp",
        });
        const s3 = await ctxOn(tree, ["agent", "stop", "coder"], { as: 65534, denoDir });
        assertEquals([s2.code !== 0, s2.stderr.includes("EACCES")], [true, true], s2.stderr);
        assertEquals([s3.code !== 0, s3.stderr.includes("EACCES")], [true, true], s3.stderr);
        assertEquals(receipt(tree, "coder")?.invocation, r.invocation);
      } finally {
        Deno.removeSync(denoDir, { recursive: true });
      }

      // Stop: the terminal by its receipt (ctxterm records process.exit), then the instance.
      const stop = await ctxOn(tree, ["agent", "stop", "coder"]);
      assertEquals(stop.code, 0, stop.stderr);
      assert(
        stop.stdout.startsWith(
          `stopped terminal id=${r.terminal} session=default pid=${r.pid} (exited)\n`,
        ),
        stop.stdout,
      );
      assert(gone(r.pid));
      assertEquals(receipt(tree, "coder"), null);
      const { events, torn } = parseTerminalEvents(read(`${dir}/events.jsonl`));
      assertEquals([events.at(-1)?.type, torn], ["process.exit", false]);
      assertEquals(read(`${dir}/state`), "exited\n");
      await a.wait((s) => s.includes("[client exit"), "the attacher to hear the end");
      const none = await ctxOn(tree, ["agent", "ps"]);
      assert(!none.stdout.includes("TERMINAL"), none.stdout);
    } finally {
      for (const p of panes) await closePane(p);
      const r = receipt(tree, "coder");
      await cleanup(tree, d);
      if (r && !gone(r.pid)) Deno.kill(r.pid, "SIGKILL");
    }
  },
});

Deno.test({
  name:
    "host start after kill -9 of the host: the terminal it left is stopped by its receipt (process.exit recorded), a forged terminal receipt with a reused pid kills nothing; both cleared",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const ws = `${tree.dir}/project`;
    Deno.mkdirSync(ws);
    const victim = new Deno.Command("sleep", { args: ["600"], stdout: "null", stderr: "null" })
      .spawn();
    let d: Daemon | null = null;
    let left: Receipt | null = null;
    try {
      d = await startDaemon(tree);
      const started = await ctxOn(tree, ["agent", "start", "coder", "--session", "s1"], {
        cwd: ws,
      });
      assertEquals(started.code, 0, started.stderr);
      left = receipt(tree, "coder", "s1") as Receipt;
      d.child.kill("SIGKILL");
      await d.stop();
      d = null;
      // The terminal outlives its killed host (nothing is left to stop it but its receipt).
      assert(!gone(left.pid), "the terminal lives on");
      const forged = {
        ...left,
        session: "s2",
        unit: "cortexfs-term-coder-s2",
        terminal: "t-forged",
        invocation: "0".repeat(32),
        pid: victim.pid,
        pgid: victim.pid,
        start_time: String(Number(startTime(victim.pid)) - 1), // the pid, reused
      };
      Deno.writeTextFileSync(receiptPath(tree, "coder", "s2"), JSON.stringify(forged) + "\n");
      d = await startDaemon(tree);
      assert(d.log().includes("stopped terminals a killed host left: coder/s1"), d.log());
      assert(gone(left.pid), "the left terminal was stopped");
      assert(!gone(victim.pid), "the forged receipt's pid was never signalled");
      assertEquals([receipt(tree, "coder", "s1"), receipt(tree, "coder", "s2")], [null, null]);
      const dir = `${tree.root}/home/0/agent/coder/session/s1/terminal/${left.terminal}`;
      const { events } = parseTerminalEvents(read(`${dir}/events.jsonl`));
      const last = events.at(-1) as { type: string; reason?: string };
      assertEquals([last.type, last.reason], ["process.exit", "sigterm"]);
      // A new start in that session makes a new terminal.
      const again = await ctxOn(tree, ["agent", "start", "coder", "--session", "s1"], { cwd: ws });
      assertEquals(again.code, 0, again.stderr);
      assert(receipt(tree, "coder", "s1")?.terminal !== left.terminal);
    } finally {
      await cleanup(tree, d);
      if (left && !gone(left.pid)) Deno.kill(left.pid, "SIGKILL");
      victim.kill("SIGKILL");
      await victim.status;
    }
  },
});
