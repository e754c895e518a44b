/** Definitions are root's in the backing tree: a real root cortexfsd, a real uid 1000; owners edit them only through /ctx. */
import { assert, assertEquals } from "../assert.ts";
import {
  cleanup,
  ctxOn,
  ctxRun,
  type Daemon,
  makeTree,
  nobodyDenoDir,
  sh,
  startDaemon,
  type Tree,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const root = Deno.uid() === 0;
const USER = 1000;

/** Every backing entry of agent `n`'s definition as "path mode uid:gid" (status/pid included). */
function backing(tree: Tree, n: string): string[] {
  const out: string[] = [];
  const add = (rel: string) => {
    const st = Deno.lstatSync(`${tree.root}/${rel}`);
    out.push(`${rel} ${((st.mode ?? 0) & 0o7777).toString(8)} ${st.uid}:${st.gid}`);
  };
  add(`agent/${n}`);
  add(`agent/${n}.d`);
  for (
    const e of [...Deno.readDirSync(`${tree.root}/agent/${n}.d`)].sort((a, b) =>
      a.name < b.name ? -1 : 1
    )
  ) {
    add(`agent/${n}.d/${e.name}`);
  }
  return out;
}

/** What backing() must say: everything root's, the dir and the entry 0755, controls 0644, env and log 0600. */
function rootOwned(tree: Tree, n: string, entryMode = 0o755): string[] {
  return backing(tree, n).map((l) => {
    const [rel] = l.split(" ");
    const mode = rel === `agent/${n}`
      ? entryMode
      : rel === `agent/${n}.d`
      ? 0o755
      : rel === `agent/${n}.d/env` || rel === `agent/${n}.d/log`
      ? 0o600
      : 0o644;
    return `${rel} ${mode.toString(8)} 0:0`;
  });
}

Deno.test({
  name:
    "agents made through the mount (uid 1000, with a program) and on the storage tree are root's in the backing tree; the mount shows the owner",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const denoDir = nobodyDenoDir(USER);
    let d: Daemon | null = null;
    try {
      const prog = `${tree.dir}/prog.sh`;
      Deno.writeTextFileSync(prog, "#!/bin/sh\necho hi\n", { mode: 0o755 });
      Deno.chmodSync(prog, 0o755);
      // On the storage tree: `ctx agent new` (root, the tree's owner) and createAgent for uid 1000.
      const onTree = await ctxRun(["agent", "new", "rootmade"], { env: { CTX_ROOT: tree.root } });
      assertEquals([onTree.code, onTree.stderr], [0, ""]);
      createAgent(tree.root, "bob", { uid: USER, gid: USER });
      d = await startDaemon(tree);
      const user = { as: USER, denoDir };
      await sh(`mkdir ${tree.mount}/home/${USER} 2>/dev/null; true`, { uid: USER });
      const made = await ctxOn(tree, ["agent", "new", "fdb", "--exec", prog], user);
      assertEquals([made.code, made.stdout, made.stderr], [0, "agent/fdb\n", ""]);

      assertEquals(backing(tree, "fdb"), rootOwned(tree, "fdb"));
      assertEquals(backing(tree, "bob"), rootOwned(tree, "bob"));
      assertEquals(backing(tree, "rootmade"), rootOwned(tree, "rootmade"));
      assertEquals(Deno.readFileSync(`${tree.root}/agent/fdb`), Deno.readFileSync(prog));
      // The mount shows each agent's owner on its entry, its .d and its controls.
      const shown = await sh(
        ["fdb", "bob", "rootmade"].map((n) =>
          `stat -c '%n %u' ${tree.mount}/agent/${n} ${tree.mount}/agent/${n}.d ${tree.mount}/agent/${n}.d/uid`
        ).join(" && "),
      );
      const m = tree.mount;
      assertEquals(shown.stdout.trim().split("\n"), [
        `${m}/agent/fdb 1000`,
        `${m}/agent/fdb.d 1000`,
        `${m}/agent/fdb.d/uid 1000`,
        `${m}/agent/bob 1000`,
        `${m}/agent/bob.d 1000`,
        `${m}/agent/bob.d/uid 1000`,
        `${m}/agent/rootmade 0`,
        `${m}/agent/rootmade.d 0`,
        `${m}/agent/rootmade.d/uid 0`,
      ]);
      // Its agent runs, as its owner.
      const sent = await ctxOn(tree, ["agent", "send", "bob", "hi bob"], user);
      assertEquals([sent.code, sent.stdout], [0, "hi bob\n"]);
    } finally {
      await cleanup(tree, d);
      await Deno.remove(denoDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "uid 1000 cannot write its agent's definition in the backing tree; through the mount it edits what the rules allow and nothing else",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const denoDir = nobodyDenoDir(USER);
    let d: Daemon | null = null;
    try {
      createAgent(tree.root, "fdb", { uid: USER, gid: USER });
      d = await startDaemon(tree);
      const dir = `${tree.root}/agent/fdb.d`;
      const before = Object.fromEntries(
        [...Deno.readDirSync(dir)].map((e) => [e.name, Deno.readTextFileSync(`${dir}/${e.name}`)]),
      );
      const entry = Deno.readTextFileSync(`${tree.root}/agent/fdb`);
      // Straight at the backing tree: every path a user would take fails with EACCES.
      const direct: [string, string][] = [
        ["uid", `echo 0 > ${dir}/uid`],
        ["gid", `echo 0 > ${dir}/gid`],
        ["program", `printf '#!/bin/sh\\nid\\n' > ${tree.root}/agent/fdb`],
        ["new file", `touch ${dir}/.uid.tmp-1-ab`],
        ["rename", `mv ${dir}/uid ${dir}/uid.old`],
        ["remove", `rm -f ${dir}/label`],
        ["chmod", `chmod 0777 ${dir}`],
        ["new dir", `mkdir ${tree.root}/agent/evil.d`],
      ];
      const got: [string, number, boolean][] = [];
      for (const [what, script] of direct) {
        const r = await sh(script, { uid: USER });
        got.push([
          what,
          r.code,
          r.stderr.includes("Permission denied") || r.stderr.includes("Operation not permitted"),
        ]);
      }
      assertEquals(got, direct.map(([w]) => [w, 1, true] as [string, number, boolean]));
      // Through the mount: the owner changes what it may; root-only and foreign values are refused.
      const m = `${tree.mount}/agent/fdb.d`;
      const cases: [string, number][] = [
        [`printf 'r-x\\n' > ${m}/perm`, 0],
        [`echo 4096 > ${m}/window`, 0],
        [`echo 0 > ${m}/uid`, 1], // uid only to itself
        [`echo 0 > ${m}/gid`, 1], // root only
        [`echo user_u:agent_r:coder_t:s0 > ${m}/label`, 1], // root only
        [`echo 0 > ${m}/owner`, 1], // owner only to itself
        [`chmod 0777 ${m}`, 1],
      ];
      const via: [string, number][] = [];
      for (const [script] of cases) via.push([script, (await sh(script, { uid: USER })).code]);
      assertEquals(via, cases);
      const after = Object.fromEntries(
        [...Deno.readDirSync(dir)].map((e) => [e.name, Deno.readTextFileSync(`${dir}/${e.name}`)]),
      );
      assertEquals(after, {
        ...before,
        perm: "r-x\n",
        window: "4096\n",
        status: after.status,
        pid: after.pid,
      });
      assertEquals(Deno.readTextFileSync(`${tree.root}/agent/fdb`), entry);
      assertEquals(backing(tree, "fdb"), rootOwned(tree, "fdb"));
      // Root through the mount may set what only root may.
      assertEquals((await sh(`echo ${USER} > ${m}/gid`)).code, 0);
      const sent = await ctxOn(tree, ["agent", "send", "fdb", "still mine"], {
        as: USER,
        denoDir,
      });
      assertEquals([sent.code, sent.stdout], [0, "still mine\n"]);
    } finally {
      await cleanup(tree, d);
      await Deno.remove(denoDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "the status-temp symlink swap cannot happen: the agent's .d is not the user's, and a racing uid-1000 loop changes nothing of root's",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    const denoDir = nobodyDenoDir(USER);
    let d: Daemon | null = null;
    let racer: Deno.ChildProcess | null = null;
    try {
      createAgent(tree.root, "fdb", { uid: USER, gid: USER });
      const victim = `${tree.dir}/victim`;
      Deno.writeTextFileSync(victim, "ROOT ONLY\n", { mode: 0o600 });
      Deno.chmodSync(victim, 0o600);
      d = await startDaemon(tree);
      const dir = `${tree.root}/agent/fdb.d`;
      // Not writable by the uid (what the swap needs), checked by the kernel for that uid.
      assertEquals(
        (await sh(`test -w ${dir} && echo writable || echo no`, { uid: USER })).stdout,
        "no\n",
      );
      // The race anyway: swap every status/pid temp for a symlink to the victim while runs flip
      // status between busy and ready (each flip is a temp + rename in that directory).
      const stop = `${tree.dir}/stop`;
      racer = new Deno.Command("setpriv", {
        args: [
          `--reuid=${USER}`,
          `--regid=${USER}`,
          "--clear-groups",
          "bash",
          "-c",
          `n=0; while [ ! -e ${stop} ]; do for f in ${dir}/.status.tmp-* ${dir}/.pid.tmp-*; do ` +
          `[ -e "$f" ] || continue; rm -f "$f" 2>/dev/null && ln -s ${victim} "$f" 2>/dev/null && n=$((n+1)); ` +
          `done; done; echo "swapped $n"`,
        ],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      const user = { as: USER, denoDir };
      for (let i = 0; i < 5; i++) {
        const r = await ctxOn(tree, ["agent", "send", "fdb", `run ${i}`], user);
        assertEquals([r.code, r.stdout], [0, `run ${i}\n`]);
      }
      Deno.writeTextFileSync(stop, "");
      const out = new TextDecoder().decode((await racer.output()).stdout);
      racer = null;
      assertEquals(out, "swapped 0\n");
      const v = Deno.lstatSync(victim);
      assertEquals([(v.mode ?? 0) & 0o7777, v.uid, v.gid, Deno.readTextFileSync(victim)], [
        0o600,
        0,
        0,
        "ROOT ONLY\n",
      ]);
      assertEquals(backing(tree, "fdb"), rootOwned(tree, "fdb"));
      assert(["ready\n", "busy\n"].includes(Deno.readTextFileSync(`${dir}/status`)));
    } finally {
      if (racer) {
        try {
          racer.kill("SIGKILL");
          await racer.output();
        } catch { /* gone */ }
      }
      await cleanup(tree, d);
      await Deno.remove(denoDir, { recursive: true }).catch(() => {});
    }
  },
});
