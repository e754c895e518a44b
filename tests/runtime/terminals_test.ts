/** The terminal supervisor's receipts (src/host/terminals.ts) with a stand-in ctxterm: held until its receipt is on disk, stopped only as the receipt proves, reaped at start. */
import net from "node:net";
import { assert, assertEquals } from "../assert.ts";
import type { CtxError } from "../../src/abi/errno.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { gone, makeTree } from "../fixture/mod.ts";
import { startTerminals } from "../../src/host/terminals.ts";
import { startTime } from "../../src/sandbox/receipt.ts";
import { openDir } from "../../src/sandbox/workspace.ts";
import { closeFd } from "../../src/sys/sock.ts";
import { ignore } from "../../src/abi/errno.ts";

const root = Deno.uid() === 0;

/**
 * A stand-in for ctxterm (its arguments are ignored): waits for `go`, records that the receipt was
 * there when it was released, prints a ready line, then sleeps in place (same pid, same start time).
 */
function standIn(mark: string, receipt: string): string[] {
  const script = `read line; [ "$line" = go ] || exit 0
[ -f '${receipt}' ] && echo held > '${mark}'
printf '{"ready":true,"pid":%s,"socket":"s","child":%s}\\n' $$ $$
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
        } catch (e) {
          ignore(e, TypeError); /* gone */
        }
        await c.status;
      }
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});

const NOBODY = 65534;

/** A listening socket at `path` and the number of connections it has taken so far. */
async function listener(path: string): Promise<{ server: net.Server; taken: () => number }> {
  let n = 0;
  const server = net.createServer((c) => (n++, c.destroy()));
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { server, taken: () => n };
}

/** Connects to `path` as root and resolves once its server took it: every earlier connect is counted. */
async function mark(path: string): Promise<void> {
  const c = net.connect(path);
  await new Promise<void>((
    resolve,
    reject,
  ) => (c.once("connect", resolve), c.once("error", reject)));
  c.destroy();
}

Deno.test({
  name:
    "a start probes a user-started terminal as the agent identity: a symlink it planted at its own socket path never makes root connect a socket only root may (the start goes on); a live socket of its own keeps the session (EBUSY)",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const name = `probe${crypto.getRandomValues(new Uint32Array(1))[0].toString(16)}`;
    createAgent(f.root, name, { uid: NOBODY, gid: NOBODY });
    // The identity's runtime dir, as a login would make it (created here only if missing).
    const runtime = `/run/user/${NOBODY}`;
    let made = false;
    try {
      Deno.mkdirSync(runtime, { mode: 0o700 });
      Deno.chownSync(runtime, NOBODY, NOBODY);
      made = true;
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
    const mine = `${runtime}/cortexfs/terminal/${name}`;
    const user = `${mine}/default/main.sock`;
    const session = `${f.root}/home/${NOBODY}/agent/${name}/session/default`;
    // A socket only root may connect, and a count of who did.
    Deno.mkdirSync(`${f.dir}/secret`, { mode: 0o700 });
    const secret = await listener(`${f.dir}/secret/root.sock`);
    let own: Awaited<ReturnType<typeof listener>> | null = null;
    const terms = await startTerminals({
      root: f.root,
      run: f.run,
      command: standIn(`${f.dir}/mark`, `${f.run}/terminal/${name}/default.json`),
      graceMs: 200,
    });
    const ws = openDir(f.dir);
    const start = () => terms.start({ agent: name, session: "default", uid: 0, workspace: ws });
    try {
      // A first start makes the session; then the identity plants its alias and, at its own
      // socket path, a symlink to root's socket.
      await start();
      await terms.stop(name);
      Deno.mkdirSync(`${mine}/default`, { recursive: true });
      Deno.mkdirSync(`${session}/terminal`, { recursive: true });
      for (
        const p of [`${runtime}/cortexfs`, `${runtime}/cortexfs/terminal`, mine, `${mine}/default`]
      ) {
        Deno.chownSync(p, NOBODY, NOBODY);
      }
      Deno.chownSync(`${session}/terminal`, NOBODY, NOBODY);
      Deno.symlinkSync(`${f.dir}/secret/root.sock`, user);
      Deno.symlinkSync(user, `${session}/terminal/main.sock`);
      const a = await start();
      assertEquals([a.already, a.terminal.state], [false, "running"]);
      await mark(`${f.dir}/secret/root.sock`);
      assertEquals(secret.taken(), 1, "root's socket took only the test's own connection");
      await terms.stop(name);
      // A live terminal socket of the identity's own still holds the session.
      Deno.removeSync(user);
      own = await listener(user);
      Deno.chownSync(user, NOBODY, NOBODY);
      const busy = await start().then(() => "started", (e) => (e as CtxError).errno);
      assertEquals(busy, "EBUSY");
      await mark(user);
      assertEquals(own.taken(), 2, "the probe reached the identity's socket, as it would");
    } finally {
      closeFd(ws);
      await terms.stop(name).catch(() => []);
      await terms.close();
      secret.server.close();
      own?.server.close();
      await Deno.remove(made ? runtime : mine, { recursive: true }).catch(() => {});
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "a terminal start whose log is past the limit rotates it: the old text moves to <s>.log.1 (the previous .1 replaced), the new ctxterm writes a fresh <s>.log",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const log = `${f.run}/terminal/coder/default.log`;
    // A stand-in that says one line on stderr (ctxterm's stderr is appended to the log).
    const script = `read line; [ "$line" = go ] || exit 0
echo "stand-in $$ started" >&2
printf '{"ready":true,"pid":%s,"socket":"s","child":%s}\\n' $$ $$
exec sleep 600`;
    const terms = await startTerminals({
      root: f.root,
      run: f.run,
      command: ["/bin/sh", "-c", script, "standin"],
      graceMs: 5000,
      logBytes: 100,
    });
    const ws = openDir(f.dir);
    try {
      Deno.mkdirSync(`${f.run}/terminal/coder`, { recursive: true });
      Deno.writeTextFileSync(`${log}.1`, "older\n");
      const old = "x".repeat(99) + "\n"; // 100 bytes: at the limit
      Deno.writeTextFileSync(log, old);
      const a = await terms.start({ agent: "coder", session: "default", uid: 0, workspace: ws });
      assertEquals(Deno.readTextFileSync(`${log}.1`), old);
      assertEquals(Deno.readTextFileSync(log), `stand-in ${a.terminal.pid} started\n`);
      await terms.stop("coder");
      // Below the limit: the next start appends to the same file.
      const b = await terms.start({ agent: "coder", session: "default", uid: 0, workspace: ws });
      assertEquals(
        Deno.readTextFileSync(log),
        `stand-in ${a.terminal.pid} started\nstand-in ${b.terminal.pid} started\n`,
      );
      assertEquals(Deno.readTextFileSync(`${log}.1`), old);
    } finally {
      closeFd(ws);
      await terms.close();
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "a terminal unit that answers something other than a ready line and lives on is stopped by its receipt, and the start is EIO (never a wait for its exit)",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const pidFile = `${f.dir}/pid`;
    const script = `read line; [ "$line" = go ] || exit 0
echo $$ > '${pidFile}'
echo '{"ready":"soon"}'
exec sleep 600`;
    const terms = await startTerminals({
      root: f.root,
      run: f.run,
      command: ["/bin/sh", "-c", script, "standin"],
      graceMs: 200,
    });
    const ws = openDir(f.dir);
    try {
      const err = await terms.start({ agent: "coder", session: "default", uid: 0, workspace: ws })
        .then(() => null, (e) => e as CtxError);
      assertEquals(err?.errno, "EIO");
      const pid = Number(Deno.readTextFileSync(pidFile));
      assert(gone(pid), "the unit that never became ready is gone");
      assertEquals(terms.list("coder"), []);
    } finally {
      closeFd(ws);
      await terms.close();
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});
