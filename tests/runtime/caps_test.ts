/** A root host's agent instances run with only the capabilities spec/runtime.md names (fixed at their exec, on every thread), and their steps with none: real cortexfsd, ctx as root and as another uid, real bwrap steps. */
import { assert, assertEquals } from "../assert.ts";
import {
  addTestAgent,
  AGENT_SH,
  capsAt,
  type CapSets,
  cleanup,
  ctxOn,
  type Daemon,
  makeTree,
  nobodyDenoDir,
  Raw,
  receiptAt,
  runPids,
  startDaemon,
  type Tree,
  until,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";

const root = Deno.uid() === 0;
const NOBODY = 65534;

/** What an instance keeps (spec/runtime.md "What still needs root"), in capability order. */
const KEPT = ["setgid", "setuid", "setfcap"];
const INSTANCE: CapSets = { inh: [], prm: KEPT, eff: KEPT, bnd: KEPT, amb: [], nnp: true };

/** The threads of `pid`, each with its capability sets. */
function threads(pid: number): { tid: string; caps: CapSets }[] {
  return [...Deno.readDirSync(`/proc/${pid}/task`)].map((e) => ({
    tid: e.name,
    caps: capsAt(`/proc/${pid}/task/${e.name}`),
  }));
}

/** The instance of `agent`: its receipt's pid is the deno process that serves it (exec'd in place). */
function instancePid(tree: Tree, agent: string): number {
  const r = receiptAt(`${tree.run}/instance/${agent}.json`);
  assert(r, `no receipt for ${agent}`);
  assertEquals(Deno.readLinkSync(`/proc/${r.pid}/exe`), Deno.execPath());
  const argv = Deno.readTextFileSync(`/proc/${r.pid}/cmdline`).split("\0");
  const at = argv.indexOf("instance");
  assertEquals(argv.slice(at, at + 2), ["instance", agent], argv.join(" "));
  return r.pid;
}

Deno.test({
  name:
    "a root host's instances keep only setgid, setuid and setfcap (no kill, no sys_ptrace, no chown: bounding, permitted, effective; every thread; no_new_privs); steps run as the agent identity with none; turns with a tool call work for a root agent and a uid's own, each in its client's cwd; a uid's first session gets its home from the host",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    addTestAgent(tree, "t"); // uid 0: its bwrap maps uid 0 into its user namespace (setfcap)
    createAgent(tree.root, "n", { uid: NOBODY, gid: NOBODY, exec: AGENT_SH });
    replaceFile(`${tree.root}/agent/n.d/env`, "LOG_DIR=/tmp\n");
    // The uid's first session: home/65534 is made and given to the uid by the host (the
    // instance has no chown: its claimDir asks the host).
    Deno.removeSync(`${tree.root}/home/${NOBODY}`, { recursive: true });
    const denoDir = nobodyDenoDir(NOBODY);
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree);
      const asRoot = (args: string[]) => ctxOn(tree, args, { cwd: tree.dir });
      const asNobody = (args: string[]) =>
        ctxOn(tree, args, { as: NOBODY, denoDir, cwd: tree.dir });
      // A root peer (its /proc needs sys_ptrace: it has every capability; the host reads it for
      // the instance) and a root agent.
      const t = await asRoot(["agent", "send", "t", "call", "tools"]);
      assertEquals([t.code, t.stdout], [0, "observed ok\n"], t.stderr);
      // Another uid as peer (setfsuid/setfsgid for its session; its /proc read by the host) and
      // its own agent (setpriv --reuid/--regid).
      const n = await asNobody(["agent", "send", "n", "call", "tools"]);
      assertEquals([n.code, n.stdout], [0, "observed ok\n"], n.stderr);
      // From a directory only that uid may read (a 0700 home, say): the step's gate, uid 0 without
      // dac_read_search, inherits the workspace fd for bwrap --bind-fd (a reopen through /proc
      // failed: Permission denied).
      const own = `${tree.dir}/own`;
      Deno.mkdirSync(own, { mode: 0o700 });
      Deno.chownSync(own, NOBODY, NOBODY);
      const o = await ctxOn(tree, ["agent", "send", "n", "call", "tools"], {
        as: NOBODY,
        denoDir,
        cwd: own,
      });
      assertEquals([o.code, o.stdout], [0, "observed ok\n"], o.stderr);
      // Each step's /workspace is its client's cwd: a file only in `own` is there for the uid
      // that sent from `own`, not for root sending from the test dir, and the reverse.
      Deno.writeTextFileSync(`${own}/in-own`, "");
      Deno.writeTextFileSync(`${tree.dir}/in-dir`, "");
      const stat = async (agent: string, name: string, cwd: string, as?: number) => {
        const args = ["agent", "send", agent, "call", "fs.stat", `/workspace/${name}`];
        const r = await ctxOn(tree, args, as ? { as, denoDir, cwd } : { cwd });
        return [r.code, r.stdout];
      };
      assertEquals({
        rootDir: await stat("t", "in-dir", tree.dir),
        rootOwn: await stat("t", "in-own", tree.dir),
        nobodyOwn: await stat("n", "in-own", own, NOBODY),
        nobodyDir: await stat("n", "in-dir", own, NOBODY),
      }, {
        rootDir: [0, "observed ok\n"],
        rootOwn: [0, "observed error\n"],
        nobodyOwn: [0, "observed ok\n"],
        nobodyDir: [0, "observed error\n"],
      });
      const st = Deno.statSync(`${tree.root}/home/${NOBODY}`);
      assertEquals([st.uid, st.gid], [NOBODY, NOBODY]);
      // Each step: the agent identity, no capability in any set, no_new_privs (bwrap's own).
      const none = "CapInh: 0000000000000000 CapPrm: 0000000000000000 " +
        "CapEff: 0000000000000000 CapBnd: 0000000000000000 CapAmb: 0000000000000000 NoNewPrivs: 1";
      const steps = {
        t: await asRoot(["agent", "send", "t", "caps"]),
        n: await asNobody(["agent", "send", "n", "caps"]),
      };
      assertEquals(
        Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, [v.code, v.stdout]])),
        {
          t: [0, `Uid: 0 0 0 0 ${none}\n`],
          n: [0, `Uid: ${NOBODY} ${NOBODY} ${NOBODY} ${NOBODY} ${none}\n`],
        },
      );
      // Each instance, every thread: exactly the kept set, fixed at exec (never dropped later).
      for (const agent of ["t", "n"]) {
        const pid = instancePid(tree, agent);
        assert(threads(pid).length > 1, `${agent}: one thread only?`);
        // Every set, also the effective one: a thread acting as a user (a non-zero fsuid) loses
        // only the filesystem capabilities (chown, dac_*, fowner, fsetid...), and none is kept.
        const off = threads(pid).filter((x) => JSON.stringify(x.caps) !== JSON.stringify(INSTANCE));
        assertEquals(off, [], `${agent} pid ${pid}`);
      }
    } finally {
      await cleanup(tree, d);
      Deno.removeSync(denoDir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "an instance without cap_kill still ends a non-root agent's step: a cancel of a uid's agent that ignores SIGTERM (with a grandchild in a session of its own) ends the run cancelled and leaves no process of it",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    createAgent(tree.root, "n", { uid: NOBODY, gid: NOBODY, exec: AGENT_SH });
    replaceFile(`${tree.root}/agent/n.d/env`, "LOG_DIR=/tmp\n");
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree);
      const sock = `${tree.run}/agent/n.sock`;
      const c = await Raw.connect(sock);
      const k = await Raw.connect(sock);
      try {
        c.write({ op: "send", id: "stubborn-1", input: "stubborn" });
        const fs = await c.until((fs) => fs.some((x) => x.type === "delta"), { boundMs: 30_000 });
        const run = String(fs.find((x) => x.type === "start")!.run);
        // The agent and its grandchild, both the uid's. Once seen, not at the delta: a fresh CI
        // clone once listed only one there (why not known; a read of /proc/<pid>/environ during
        // the grandchild's exec failing is one way).
        await until(() => runPids(run).length >= 2, "the agent and its grandchild", 30_000);
        const pids = runPids(run);
        for (const p of pids) {
          assertEquals(
            Deno.readTextFileSync(`/proc/${p}/status`).match(/^Uid:\t(\d+)/m)?.[1],
            `${NOBODY}`,
          );
        }
        k.write({ op: "cancel", id: run });
        const acks = await k.until((fs) => fs.some((x) => x.type === "ack"), { boundMs: 30_000 });
        assertEquals(acks.find((x) => x.type === "ack")?.status, "cancelled");
        const done = await c.until((fs) => fs.some((x) => x.type === "done"), { boundMs: 30_000 });
        assertEquals(done.at(-1)?.status, "cancelled");
        // Without a way to signal the uid's processes the step would hold on for its 300 s.
        await until(() => runPids(run).length === 0, "the step's processes to end", 60_000);
      } finally {
        c.close();
        k.close();
      }
    } finally {
      await cleanup(tree, d);
    }
  },
});
