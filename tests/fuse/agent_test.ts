/** Agents made and removed through the mount: `ctx agent new` as root and as another uid, the socket at once, the rules. */
import { assertEquals } from "../assert.ts";
import {
  cleanup,
  ctxRun,
  type Daemon,
  makeTree,
  nobodyDenoDir,
  sh,
  startDaemon,
} from "../fixture/mod.ts";
import { createAgent, NEW_AGENT_LABEL } from "../../src/store/agent_new.ts";
import { NEW_AGENT_LABEL as MOUNT_LABEL } from "../../src/fuse/bridge.ts";

type Snap = Record<string, string>;

/** Every file and dir an agent creation makes, as "mode uid gid [content]" (sessions excluded). */
function snapshot(root: string, name: string, uid: number): Snap {
  const out: Snap = {};
  const add = (rel: string) => {
    const st = Deno.lstatSync(`${root}/${rel}`);
    const body = st.isFile ? ` ${JSON.stringify(Deno.readTextFileSync(`${root}/${rel}`))}` : "";
    out[rel] = `${(st.mode! & 0o7777).toString(8)} ${st.uid} ${st.gid}${body}`;
  };
  add(`agent/${name}`);
  add(`agent/${name}.d`);
  for (const e of Deno.readDirSync(`${root}/agent/${name}.d`)) {
    // status and pid are the runtime's projections: idle until an instance serves, then its pid.
    if (e.name !== "status" && e.name !== "pid") add(`agent/${name}.d/${e.name}`);
  }
  for (const d of ["", "/agent", "/model", "/tool", `/agent/${name}`, `/agent/${name}/session`]) {
    add(`home/${uid}${d}`);
  }
  return out;
}

Deno.test("ctx agent new through the mount (root and uid 65534) makes what it makes on the storage tree; the socket answers at once", async () => {
  const tree = await makeTree();
  const ref = await makeTree();
  const denoDir = nobodyDenoDir();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const env = { CTX_ROOT: tree.mount };
    const nobody = { CTX_ROOT: tree.mount, DENO_DIR: denoDir, HOME: tree.dir };
    const made = [
      await ctxRun(["agent", "new", "ops"], { env }),
      await ctxRun(["agent", "new", "mine", "--perm", "r--"], { env: nobody, as: 65534 }),
    ];
    assertEquals(made.map((r) => [r.code, r.stdout, r.stderr]), [
      [0, "agent/ops\n", ""],
      [0, "agent/mine\n", ""],
    ]);
    // The same creations straight on a storage tree (the reference result).
    createAgent(ref.root, "ops", { uid: 0, gid: 0 });
    createAgent(ref.root, "mine", { uid: 65534, gid: 65534, perm: "r--" });
    assertEquals(snapshot(tree.root, "ops", 0), snapshot(ref.root, "ops", 0));
    assertEquals(snapshot(tree.root, "mine", 65534), snapshot(ref.root, "mine", 65534));
    // The definition is root's in the backing tree whoever made it (only home/<uid>/ is the
    // uid's); the mount shows the owner.
    const defs = Object.entries(snapshot(tree.root, "mine", 65534))
      .filter(([k]) => k.startsWith("agent/"))
      .map(([k, v]) => [k, v.split(" ").slice(0, 3).join(" ")]);
    assertEquals(
      defs,
      defs.map((
        [k],
      ) => [
        k,
        `${
          k === "agent/mine.d/env" || k === "agent/mine.d/log"
            ? 600
            : k.startsWith("agent/mine.d/")
            ? 644
            : 755
        } 0 0`,
      ]),
    );
    const owners = await sh(
      `stat -c '%u' ${tree.mount}/agent/mine ${tree.mount}/agent/mine.d/perm`,
    );
    assertEquals(owners.stdout, "65534\n65534\n");
    const shown = (n: string, f: string) => Deno.readTextFileSync(`${tree.root}/agent/${n}.d/${f}`);
    // Served (its socket is armed), no instance yet: idle, no pid.
    assertEquals(
      [shown("ops", "status"), shown("mine", "status"), shown("ops", "pid")],
      ["idle\n", "idle\n", ""],
    );

    // Served at once: the alias resolves to a live socket, and a send works right away.
    const sock = await sh(
      `readlink ${tree.mount}/agent/mine.sock && test -S ${tree.mount}/agent/mine.sock && echo live`,
    );
    assertEquals(sock.stdout, `${tree.run}/agent/mine.sock\nlive\n`);
    const sent = [
      await ctxRun(["agent", "send", "ops", "hi ops"], { env }),
      await ctxRun(["agent", "send", "mine", "hi mine"], { env: nobody, as: 65534 }),
    ];
    assertEquals(sent.map((r) => [r.code, r.stdout]), [[0, "hi ops\n"], [0, "hi mine\n"]]);
    // The first connection started ops' own instance: ready, its pid (not the daemon's).
    const pid = Number(shown("ops", "pid"));
    assertEquals([shown("ops", "status"), pid > 0, pid !== d.child.pid], ["ready\n", true, true]);
    // The socket's own rule holds too: another uid is not the owner.
    const other = await ctxRun(["agent", "send", "mine", "hi"], { env: nobody, as: 65533 });
    assertEquals(other.code !== 0, true);
    assertEquals(
      JSON.parse(Deno.readTextFileSync(`${tree.mount}/status`)).agents.map((a: { name: string }) =>
        a.name
      ),
      ["coder", "mine", "ops"],
    );
  } finally {
    await cleanup(tree, d);
    await cleanup(ref);
    await Deno.remove(denoDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("creation rules: only your own new agent, the identity ctx gives, your own home/<uid>; others are refused", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const m = tree.mount;
    const as = (uid: number, script: string) => sh(script, { uid });
    const code = async (uid: number, script: string) => (await as(uid, script)).code;
    const cases: [number, string, number][] = [
      // [uid, command, exit code]
      [65534, `mkdir ${m}/agent/x`, 1], // not a control dir
      [65534, `mkdir ${m}/agent/coder.d`, 1], // exists
      [65534, `mkdir ${m}/agent/.hidden.d`, 1], // not a valid name
      [65534, `touch ${m}/agent/loose`, 1], // no arbitrary files
      [65534, `rm ${m}/agent/coder`, 1], // someone else's agent (sticky agent/)
      [65534, `echo x > ${m}/agent/coder.d/.window.tmp-1-ab`, 1],
      [65534, `mkdir ${m}/home/12`, 1], // another uid's home
      [65534, `touch ${m}/home/f`, 1], // home/ holds uid dirs only
      [65534, `mkdir ${m}/home/65534 && mkdir ${m}/agent/mine.d`, 0],
      [65533, `touch ${m}/agent/mine.d/.owner.tmp-1-ab`, 1], // not the creator
      [
        65534,
        `echo 0 > ${m}/agent/mine.d/.o.tmp-1-ab && mv ${m}/agent/mine.d/.o.tmp-1-ab ${m}/agent/mine.d/owner`,
        1,
      ],
      [
        65534,
        `echo 0 > ${m}/agent/mine.d/.g.tmp-1-ab && mv ${m}/agent/mine.d/.g.tmp-1-ab ${m}/agent/mine.d/gid`,
        1,
      ],
      [
        65534,
        `echo user_u:agent_r:coder_t:s0 > ${m}/agent/mine.d/.l.tmp-1-ab && mv ${m}/agent/mine.d/.l.tmp-1-ab ${m}/agent/mine.d/label`,
        1,
      ],
      [
        65534,
        `echo 65534 > ${m}/agent/mine.d/.o.tmp-1-ab && mv ${m}/agent/mine.d/.o.tmp-1-ab ${m}/agent/mine.d/owner`,
        0,
      ],
      [65534, `printf 'rwx\\n' > ${m}/agent/mine.d/perm`, 0],
      [65534, `echo bogus > ${m}/agent/mine.d/nonsense`, 1], // unknown control
      [65534, `echo x > ${m}/agent/.other.tmp-1-ab`, 1], // staging an entry without its .d
      [
        65534,
        `echo x > ${m}/agent/.mine.tmp-1-ab && mv ${m}/agent/.mine.tmp-1-ab ${m}/agent/coder`,
        1,
      ],
      [65533, `rm ${m}/agent/.mine.tmp-1-ab`, 1], // not the stager
      [65534, `rm ${m}/agent/.mine.tmp-1-ab`, 0],
    ];
    const got: [number, string, number][] = [];
    for (const [uid, script] of cases) got.push([uid, script, await code(uid, script)]);
    assertEquals(got, cases);
    assertEquals(Deno.readTextFileSync(`${tree.root}/agent/mine.d/owner`), "65534\n");
    assertEquals(Deno.readTextFileSync(`${tree.root}/agent/mine.d/perm`), "rwx\n");
    assertEquals(
      [...Deno.readDirSync(`${tree.root}/agent`)].map((e) => e.name).filter((n) =>
        !n.endsWith(".sock")
      )
        .sort(),
      ["coder", "coder.d", "mine.d"],
    );
    // The projected label is the one ctx agent new gives, here and in the store.
    assertEquals(MOUNT_LABEL, NEW_AGENT_LABEL);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("removing an agent through the mount: entry first (its socket goes), then its .d; sessions stay", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const env = { CTX_ROOT: tree.mount };
    assertEquals((await ctxRun(["agent", "new", "gone"], { env })).code, 0);
    assertEquals((await ctxRun(["agent", "send", "gone", "x"], { env })).stdout, "x\n");
    const early = await sh(`rm -r ${tree.mount}/agent/gone.d`);
    assertEquals(early.code, 1); // the entry is still there
    const rm = await sh(
      `rm ${tree.mount}/agent/gone && rm -r ${tree.mount}/agent/gone.d && ls ${tree.mount}/agent && ls ${tree.run}/agent`,
    );
    assertEquals(rm.stdout, "coder\ncoder.d\ncoder.sock\ncoder.sock\n", rm.stderr);
    const after = await ctxRun(["agent", "send", "gone", "x"], { env });
    assertEquals(after.code !== 0, true);
    assertEquals(
      Deno.readTextFileSync(`${tree.root}/home/0/agent/gone/session/default/messages.jsonl`)
        .trim().split("\n").length,
      2,
    );
  } finally {
    await cleanup(tree, d);
  }
});
