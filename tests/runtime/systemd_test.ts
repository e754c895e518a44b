/**
 * The supervisor's systemd path with real parts (cortexfsd, its instances, the ctx CLI) and a FAKE
 * of the world's edge: these machines have no systemd manager (PID 1 is not systemd) and none may
 * be started, so `systemd-run` and `systemctl` are stand-ins the test writes into its own temp dir
 * and names with `--systemd-tools`. They record their argv and do what the manager would for a
 * scope: `systemd-run --scope` execs the command in place; `systemctl stop` sends SIGTERM to it.
 * No real systemd tool is ever run here.
 */
import { assert, assertEquals, assertRejects } from "../assert.ts";
import {
  capsAt,
  cleanup,
  ctxRun,
  type Daemon,
  makeTree,
  startDaemon,
  until,
} from "../fixture/mod.ts";
import { CAP_NAMES, dropArgv, INSTANCE_CAPS } from "../../src/host/caps.ts";
import { detectManager, systemdBooted } from "../../src/host/systemd.ts";
import { parseReceipt, scopeUnit } from "../../src/host/receipt.ts";
import { startTime } from "../../src/sandbox/receipt.ts";
import { ignore } from "../../src/abi/errno.ts";

const root = Deno.uid() === 0;
const read = (p: string) => Deno.readTextFileSync(p);

function alive(pid: number): boolean {
  try {
    return read(`/proc/${pid}/stat`).split(") ")[1][0] !== "Z";
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/**
 * Writes the fake `systemd-run` and `systemctl` into `dir` (0700, the test's own);
 * `noInvocation`: its systemctl names no InvocationID for any unit.
 */
function fakeManager(dir: string, options: { noInvocation?: boolean } = {}): string {
  const fake = `${dir}/fake-systemd`;
  Deno.mkdirSync(fake, { mode: 0o700 });
  // FAKE systemd-run: records its argv (NUL-separated), registers the "scope" (its pid and a
  // fresh InvocationID), then execs the command after `--` in place, as --scope does.
  Deno.writeTextFileSync(
    `${fake}/systemd-run`,
    `#!/bin/sh
D='${fake}'
printf '%s\\0' "$@" > "$D/systemd-run.$$.argv"
unit=''
while [ $# -gt 0 ]; do
  case "$1" in
    --unit=*) unit="\${1#--unit=}" ;;
    --) shift; break ;;
  esac
  shift
done
echo $$ > "$D/$unit.pid"
od -An -N16 -tx1 /dev/urandom | tr -d ' \\n' > "$D/$unit.inv"
exec "$@"
`,
    { mode: 0o700 },
  );
  // FAKE systemctl: records each call (one line of NUL-separated args); answers Version and a
  // unit's InvocationID; `stop` sends SIGTERM to the scope's group and returns.
  Deno.writeTextFileSync(
    `${fake}/systemctl`,
    `#!/bin/sh
D='${fake}'
{ printf '%s\\0' "$@"; printf '\\n'; } >> "$D/systemctl.calls"
case "$1 $2 $3 $4" in
  "show -p Version --value") echo "0-fake"; exit 0 ;;
  "show -p InvocationID --value") ${
      options.noInvocation ? "" : `cat "$D/$5.inv" 2>/dev/null; `
    }echo; exit 0 ;;
esac
if [ "$1" = stop ]; then kill -TERM -"$(cat "$D/$2.pid")"; exit 0; fi
exit 1
`,
    { mode: 0o700 },
  );
  return fake;
}

/** The fake systemctl's calls, each its argv. */
function calls(fake: string): string[][] {
  let text = "";
  try {
    text = read(`${fake}/systemctl.calls`);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* none */
  }
  return text.split("\n").filter((l) => l !== "").map((l) => l.split("\0").slice(0, -1));
}

Deno.test({
  name:
    "where a manager answers (fake systemd-run/systemctl named by --systemd-tools): the instance runs as a transient scope with the socket as fd 3, its receipt carries the manager's InvocationID, stop goes through systemctl stop",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const fake = fakeManager(tree.dir);
    const ctx = (args: string[]) => ctxRun(args, { env: { CTX_ROOT: tree.mount } });
    const d_ = `${tree.root}/agent/coder.d`;
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { args: ["--systemd-tools", fake] });
      assert(d.log().includes(`systemd 0-fake answers (${fake}/systemctl)`), d.log());
      // The send is served by the instance through the handed-over socket.
      const sent = await ctx(["agent", "send", "coder", "one"]);
      assertEquals([sent.code, sent.stdout], [0, "one\n"], sent.stderr);
      const runs = [...Deno.readDirSync(fake)].filter((e) => e.name.endsWith(".argv"));
      assertEquals(runs.length, 1);
      const argv = read(`${fake}/${runs[0].name}`).split("\0").slice(0, -1);
      assertEquals(argv.slice(0, 10), [
        "--scope",
        "--unit=cortexfs-agent-coder.scope",
        "--quiet",
        "--collect",
        "--property=TimeoutStopSec=5000ms",
        "--",
        "/bin/sh",
        "-c",
        'export LISTEN_PID=$$; echo scope; exec "$@"',
        "sh",
      ]);
      // sh execs setpriv, which fixes the instance's capabilities and execs it in place.
      const drop = dropArgv({ uid: 0 });
      assertEquals(argv.slice(10, 10 + drop.length), drop);
      const at = argv.indexOf("instance");
      assertEquals(argv.slice(at, at + 2), ["instance", "coder"]);
      const invocation = read(`${fake}/cortexfs-agent-coder.scope.inv`);
      const pid = Number(read(`${fake}/cortexfs-agent-coder.scope.pid`));
      const kept = [...INSTANCE_CAPS].sort((a, b) => CAP_NAMES.indexOf(a) - CAP_NAMES.indexOf(b));
      assertEquals(capsAt(`/proc/${pid}`), {
        inh: [],
        prm: kept,
        eff: kept,
        bnd: kept,
        amb: [],
        nnp: true,
      });
      const r = JSON.parse(read(`${tree.run}/instance/coder.json`));
      assertEquals([r.manager, r.unit, r.invocation, r.pid, r.pgid], [
        "systemd",
        "cortexfs-agent-coder.scope",
        invocation,
        pid,
        pid,
      ]);
      assertEquals(JSON.parse(read(`${d_}/meta.json`)).receipt.invocation, invocation);
      assert(
        read(`${d_}/log`).includes(
          `agent.start unit=cortexfs-agent-coder.scope invocation=${invocation} pid=${pid}\n`,
        ),
      );
      assertEquals(calls(fake).slice(1), [
        ["show", "-p", "InvocationID", "--value", "cortexfs-agent-coder.scope"],
      ]);
      const ps = await ctx(["agent", "ps"]);
      assert(ps.stdout.includes(`cortexfs-agent-coder.scope\t${invocation}`), ps.stdout);

      const stopped = await ctx(["agent", "stop", "coder"]);
      assertEquals(stopped.code, 0, stopped.stderr);
      assertEquals(calls(fake).slice(2), [
        ["show", "-p", "InvocationID", "--value", "cortexfs-agent-coder.scope"],
        ["stop", "cortexfs-agent-coder.scope"],
      ]);
      assertEquals([...Deno.readDirSync(`${tree.run}/instance`)].map((e) => e.name), []);
      assertEquals([read(`${d_}/status`), read(`${d_}/pid`)], ["idle\n", ""]);
      // SIGTERM from the (fake) manager: the instance cancels its runs and exits 0.
      const exit = JSON.parse(read(`${d_}/meta.json`)).receipt.exit;
      assertEquals([exit.code, exit.signal], [0, null]);
      assert(read(`${d_}/log`).includes(`instance coder pid ${pid} exited (code 0)\n`));
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "on this machine (no manager) cortexfsd picks the built-in supervisor, and a systemd-run/systemctl first on its PATH is never run",
  ignore: !root || systemdBooted(),
  async fn() {
    const tree = await makeTree();
    const fake = fakeManager(tree.dir);
    const ctx = (args: string[]) => ctxRun(args, { env: { CTX_ROOT: tree.mount } });
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, {
        wrap: ["env", `PATH=${fake}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`],
      });
      assert(
        d.log().includes(
          "no systemd manager answers: the built-in supervisor starts the agent instances",
        ),
        d.log(),
      );
      const sent = await ctx(["agent", "send", "coder", "one"]);
      assertEquals([sent.code, sent.stdout], [0, "one\n"], sent.stderr);
      const r = JSON.parse(read(`${tree.run}/instance/coder.json`));
      assertEquals([r.manager, r.unit], [undefined, "cortexfs-agent-coder"]);
      assertEquals([...Deno.readDirSync(fake)].map((e) => e.name).sort(), [
        "systemctl",
        "systemd-run",
      ]);
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test({
  name:
    "detectManager(): builtin runs nothing; auto here (no /run/systemd/system) is the built-in supervisor; an override or --supervisor systemd that no manager answers is ENOTSUP",
  ignore: systemdBooted(),
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "cortexfs-systemd-" });
    try {
      const fake = fakeManager(dir);
      assertEquals(await detectManager({ mode: "builtin", tools: fake }), null);
      assertEquals(await detectManager({}), null);
      assertEquals(calls(fake), []);
      assertEquals(await detectManager({ tools: fake }), {
        run: `${fake}/systemd-run`,
        ctl: `${fake}/systemctl`,
        version: "0-fake",
      });
      await assertRejects(() => detectManager({ mode: "systemd" }), Error, "no systemd manager");
      await assertRejects(() => detectManager({ tools: `${dir}/none` }), Error, "no systemd");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test("a systemd receipt names its agent's scope (escaped); a built-in receipt cannot claim one", () => {
  const base = {
    schema: "cortexfs.instance-receipt/v1",
    invocation: "ab".repeat(16),
    agent: "a+b",
    pid: 1234,
    pgid: 1234,
    start_time: "5",
    boot_id: "x",
    uid: 0,
    started_at: 0,
  };
  assertEquals(scopeUnit("cortexfs-agent-a+b"), "cortexfs-agent-a\\x2bb.scope");
  const ok = { ...base, manager: "systemd", unit: "cortexfs-agent-a\\x2bb.scope" };
  assertEquals(parseReceipt(JSON.stringify(ok)), ok as never);
  for (
    const bad of [
      { ...base, manager: "systemd", unit: "cortexfs-agent-a+b" },
      { ...base, unit: "cortexfs-agent-a\\x2bb.scope" },
      { ...base, manager: "other", unit: "cortexfs-agent-a+b" },
    ]
  ) assertEquals(parseReceipt(JSON.stringify(bad)), undefined);
});

Deno.test({
  name:
    "host start after kill -9 of a host with a manager: a unit it left that still has the receipt's InvocationID is stopped through systemctl stop; one whose unit has another InvocationID is cleared and nothing is asked to stop",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const fake = fakeManager(tree.dir);
    const flag = `${tree.dir}/hang-once`;
    Deno.writeTextFileSync(flag, "");
    const ctx = (args: string[]) => ctxRun(args, { env: { CTX_ROOT: tree.mount } });
    // A live process a forged receipt names with its true start time: only the unit's
    // InvocationID tells it is not ours.
    const victim = new Deno.Command("sleep", { args: ["600"], stdout: "null", stderr: "null" })
      .spawn();
    let d: Daemon | null = null;
    let left = 0;
    try {
      // An instance that hangs before ready outlives its killed host (it never reads stdin).
      d = await startDaemon(tree, {
        args: ["--systemd-tools", fake, "--start-timeout", "600"],
        wrap: ["env", `CORTEXFS_TEST_HANG_BEFORE_READY=${flag}`],
      });
      const started = ctx(["agent", "start", "coder"]);
      await until(
        () => read(`${tree.root}/agent/coder.d/log`).includes("hanging before ready"),
        "the instance to hang",
      );
      const r = JSON.parse(read(`${tree.run}/instance/coder.json`));
      left = r.pid;
      assertEquals(r.manager, "systemd");
      d.child.kill("SIGKILL");
      await d.stop();
      d = null;
      assert((await started).code !== 0); // its host went away
      assert(alive(left), "the instance lives on");
      const forged = {
        ...r,
        agent: "other",
        unit: "cortexfs-agent-other.scope",
        invocation: "0".repeat(32),
        pid: victim.pid,
        pgid: victim.pid,
        start_time: startTime(victim.pid),
      };
      Deno.writeTextFileSync(`${tree.run}/instance/other.json`, JSON.stringify(forged) + "\n");
      Deno.writeTextFileSync(`${fake}/cortexfs-agent-other.scope.inv`, "1".repeat(32));
      const before = calls(fake).length;
      d = await startDaemon(tree, { args: ["--systemd-tools", fake] });
      assert(d.log().includes("stopped instances a killed host left: coder\n"), d.log());
      assert(!alive(left), "the unit it left was stopped");
      assert(alive(victim.pid), "the forged receipt's pid was never signalled");
      const asked = calls(fake).slice(before).filter((c) => c[0] !== "show" || c[2] !== "Version")
        .sort();
      assertEquals(asked, [
        ["show", "-p", "InvocationID", "--value", "cortexfs-agent-coder.scope"],
        ["show", "-p", "InvocationID", "--value", "cortexfs-agent-other.scope"],
        ["stop", "cortexfs-agent-coder.scope"],
      ]);
      assertEquals([...Deno.readDirSync(`${tree.run}/instance`)].map((e) => e.name), []);
    } finally {
      await cleanup(tree, d);
      if (left && alive(left)) Deno.kill(left, "SIGKILL");
      victim.kill("SIGKILL");
      await victim.status;
    }
  },
});

Deno.test({
  name:
    "a manager that names no InvocationID for the scope: the instance is never released, the host records it failed, the waiting client gets EIO",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const fake = fakeManager(tree.dir, { noInvocation: true });
    const d_ = `${tree.root}/agent/coder.d`;
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { args: ["--systemd-tools", fake] });
      const sent = await ctxRun(["agent", "send", "coder", "one"], {
        env: { CTX_ROOT: tree.mount },
      });
      assertEquals(sent.code !== 0, true, sent.stdout);
      assert(sent.stderr.includes("EIO") && sent.stderr.includes("could not start"), sent.stderr);
      const pid = Number(read(`${fake}/cortexfs-agent-coder.scope.pid`));
      const log = read(`${d_}/log`);
      assert(
        log.includes(
          `instance coder pid ${pid}: the manager gave no InvocationID for cortexfs-agent-coder.scope; not released\n`,
        ),
        log,
      );
      assert(
        log.includes(
          `instance coder pid ${pid} exited (code 0): failed: the manager gave no InvocationID`,
        ),
        log,
      );
      assert(!log.includes("agent.start"), log); // never released: no receipt, no start line
      assertEquals([...Deno.readDirSync(`${tree.run}/instance`)].map((e) => e.name), []);
      assertEquals([read(`${d_}/status`), read(`${d_}/pid`)], ["dead\n", ""]);
    } finally {
      await cleanup(tree, d);
    }
  },
});
