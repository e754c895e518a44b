/** Hard authority, hole 7: an agent's `env` (where an executable agent's key lives) is its owner's and root's alone: 0600 in storage, through the mount, after writes, and after the migration. */
import { assert, assertEquals } from "../assert.ts";
import {
  cleanup,
  ctxRun,
  type Daemon,
  makeTree,
  nobodyDenoDir,
  sh,
  startDaemon,
} from "../fixture/mod.ts";
import { ERRNO } from "../../src/abi/errno.ts";
import { OP } from "../../src/abi/fuse.ts";
import { handlerOf, type Request } from "../../src/fuse/conn.ts";
import { CtxFs } from "../../src/fuse/ctxfs.ts";
import {
  checkCommit,
  commitControl,
  controlKind,
  creating,
  objectOwner,
  secretControl,
} from "../../src/fuse/bridge.ts";
import { readBootstrap } from "../../src/store/bootstrap.ts";
import { writeControl } from "../../src/store/control.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { update } from "../../src/store/generation.ts";
import { latestVersion, MIGRATIONS } from "../../src/store/migrate.ts";

const KEY = "API_KEY=sk-test-0123456789\n";

/** `mode uid gid` of a backing file. */
function backing(path: string): string {
  const st = Deno.lstatSync(path);
  return `${(st.mode! & 0o7777).toString(8)} ${st.uid} ${st.gid}`;
}

Deno.test("through the mount, a root-owned agent's env is 0600 and root's: root reads and writes it, uid 1000 gets Permission denied; the backing file stays 0600", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const env = `${tree.mount}/agent/coder.d/env`;
    assertEquals(await sh(`stat -c '%a %u' ${env}`), { code: 0, stdout: "600 0\n", stderr: "" });
    assertEquals(backing(`${tree.root}/agent/coder.d/env`), "600 0 0");

    // A write through the mount is an atomic replace: it must not come back 0644.
    assertEquals(await sh(`printf '${KEY}' > ${env} && cat ${env}`), {
      code: 0,
      stdout: KEY,
      stderr: "",
    });
    assertEquals((await sh(`stat -c '%a %u' ${env}`)).stdout, "600 0\n");
    assertEquals(backing(`${tree.root}/agent/coder.d/env`), "600 0 0");
    assertEquals(Deno.readTextFileSync(`${tree.root}/agent/coder.d/env`), KEY);
    // So does an editor's rename (`sed -i`: a temp in the .d renamed over the control).
    assertEquals(
      (await sh(`sed -i 's/0123/4567/' ${env} && stat -c '%a %u' ${env}`)).stdout,
      "600 0\n",
    );
    assertEquals(backing(`${tree.root}/agent/coder.d/env`), "600 0 0");

    const other = await sh(`cat ${env}`, { uid: 1000 });
    assertEquals(other.code, 1);
    assertEquals(other.stdout, "");
    assert(other.stderr.includes("Permission denied"), other.stderr);
    // Other controls stay world-readable.
    assertEquals((await sh(`cat ${tree.mount}/agent/coder.d/perm`, { uid: 1000 })).code, 0);

    // A file written behind the mount's back (or a tree before migration 4) is 0644 in storage:
    // the mount still shows and enforces 0600.
    Deno.chmodSync(`${tree.root}/agent/coder.d/env`, 0o644);
    assertEquals((await sh(`stat -c '%a %u' ${env}`)).stdout, "600 0\n");
    const still = await sh(`cat ${env}`, { uid: 1000 });
    assertEquals([still.code, still.stdout], [1, ""]);
    assert(still.stderr.includes("Permission denied"), still.stderr);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("an agent uid 1000 made through the mount: its env is 0600 and 1000's, readable and writable by 1000 (also with ctx set), not readable by 1001", async () => {
  const tree = await makeTree();
  const denoDir = nobodyDenoDir(1000);
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const as1000 = { env: { CTX_ROOT: tree.mount, DENO_DIR: denoDir, HOME: tree.dir }, as: 1000 };
    const made = await ctxRun(["agent", "new", "mine"], as1000);
    assertEquals([made.code, made.stdout, made.stderr], [0, "agent/mine\n", ""]);
    const env = `${tree.mount}/agent/mine.d/env`;
    // Born 0600: the backing file root's, the mount showing the owner.
    assertEquals(backing(`${tree.root}/agent/mine.d/env`), "600 0 0");
    assertEquals((await sh(`stat -c '%a %u' ${env}`)).stdout, "600 1000\n");

    assertEquals(await sh(`echo K=V > ${env} && cat ${env}`, { uid: 1000 }), {
      code: 0,
      stdout: "K=V\n",
      stderr: "",
    });
    assertEquals(backing(`${tree.root}/agent/mine.d/env`), "600 0 0");
    const set = await ctxRun(["set", "agent/mine.d/env", KEY], as1000);
    assertEquals([set.code, set.stderr], [0, ""]);
    assertEquals(backing(`${tree.root}/agent/mine.d/env`), "600 0 0");
    assertEquals((await sh(`cat ${env}`, { uid: 1000 })).stdout, KEY);
    assertEquals((await sh(`stat -c '%a %u' ${env}`)).stdout, "600 1000\n");

    const other = await sh(`cat ${env}`, { uid: 1001 });
    assertEquals([other.code, other.stdout], [1, ""]);
    assert(other.stderr.includes("Permission denied"), other.stderr);
    const write = await sh(`echo X=1 > ${env}`, { uid: 1001 });
    assertEquals(write.code, 1);
    assertEquals(Deno.readTextFileSync(`${tree.root}/agent/mine.d/env`), KEY);
    // Root reads every env.
    assertEquals((await sh(`cat ${env}`)).stdout, KEY);
  } finally {
    await cleanup(tree, d);
    await Deno.remove(denoDir, { recursive: true }).catch(() => {});
  }
});

/** A request the way the connection decodes it, for calling a handler with no kernel in between. */
function request(
  opcode: number,
  options: { nodeid: number; uid: number; names?: string[]; arg?: Record<string, number> },
): Request {
  return {
    opcode,
    unique: 1,
    nodeid: options.nodeid,
    uid: options.uid,
    gid: options.uid,
    pid: 1,
    arg: options.arg ?? {},
    names: options.names ?? [],
    data: new Uint8Array(0),
  } as Request; // `arg` as given: the fields this test's handlers read
}

Deno.test("the daemon's OPEN itself refuses a secret control to anyone but its owner and root (default_permissions not relied on)", async () => {
  const tree = await makeTree();
  try {
    const root = tree.root;
    createAgent(root, "mine", { uid: 1000, gid: 1000 });
    const fs = new CtxFs({
      root,
      run: tree.run,
      bins: {},
      ttl: 0,
      status: () => "",
      commit: (p, b, o) => commitControl(root, p, b, o),
      check: (p, b, o) => checkCommit(root, p, b, o),
      controlKind,
      secret: secretControl,
      owner: (p) => objectOwner(root, p),
      creating: (n) => creating(root, n),
    });
    const out = new Uint8Array(1 << 20);
    const call = (req: Request) => handlerOf(fs, req.opcode)!(req, out) as number; // every op used here is handled, synchronously
    const lookup = (path: string) => {
      let id = 1;
      for (const name of path.split("/")) {
        const n = call(request(OP.LOOKUP, { nodeid: id, uid: 0, names: [name] }));
        assert(n > 0, `lookup ${name}: ${n}`);
        id = Number(new DataView(out.buffer).getBigUint64(0, true));
      }
      return id;
    };
    const open = (path: string, uid: number) => {
      const n = call(request(OP.OPEN, { nodeid: lookup(path), uid, arg: { flags: 0 } }));
      if (n >= 0) {
        const fh = new DataView(out.buffer).getUint32(0, true);
        call(request(OP.RELEASE, { nodeid: 0, uid, arg: { fh } }));
      }
      return n >= 0 ? "open" : -n;
    };
    assertEquals(
      [
        open("agent/mine.d/env", 1000),
        open("agent/mine.d/env", 0),
        open("agent/mine.d/env", 1001),
        open("agent/coder.d/env", 1000),
        open("agent/mine.d/perm", 1001),
      ],
      ["open", "open", ERRNO.EACCES, ERRNO.EACCES, "open"],
    );
  } finally {
    await cleanup(tree);
  }
});

Deno.test("migration 4 secret-control-modes makes an older tree's 0644 env 0600 and leaves every other control alone; the store writes env 0600", async () => {
  const s = await Deno.makeTempDir({ prefix: "ctx-sec-env-" });
  await Deno.chmod(s, 0o755); // createAgent makes uid 1000's home as 1000
  try {
    // A tree as the v3 binary left it: env 0644 like every control.
    update(s, { migrations: MIGRATIONS.slice(0, 3) });
    const v3 = Deno.realPathSync(`${s}/current`);
    createAgent(v3, "old", { uid: 1000, gid: 1000 });
    for (const n of ["coder", "old"]) Deno.chmodSync(`${v3}/agent/${n}.d/env`, 0o644);
    assertEquals(backing(`${v3}/agent/coder.d/env`), "644 0 0");

    const r = update(s);
    assertEquals([r.from, r.to], [3, latestVersion(MIGRATIONS)]);
    const cur = Deno.realPathSync(`${s}/current`);
    assertEquals(readBootstrap(cur).applied_migrations.find((m) => m.version === 4), {
      version: 4,
      id: "secret-control-modes",
    });
    assertEquals(
      [backing(`${cur}/agent/coder.d/env`), backing(`${cur}/agent/old.d/env`)],
      ["600 0 0", "600 0 0"],
    );
    assertEquals(
      [backing(`${cur}/agent/coder.d/perm`), backing(`${cur}/agent/old.d/owner`)],
      ["644 0 0", "644 0 0"],
    );
    // The previous generation is untouched (migrations edit a clone).
    assertEquals(backing(`${v3}/agent/coder.d/env`), "644 0 0");

    // `ctx set` on the storage tree (writeControl as root) replaces env and keeps it 0600.
    writeControl(cur, "agent/old.d/env", new TextEncoder().encode(KEY), { uid: 1000 });
    assertEquals(backing(`${cur}/agent/old.d/env`), "600 0 0");
    assertEquals(Deno.readTextFileSync(`${cur}/agent/old.d/env`), KEY);
  } finally {
    await Deno.remove(s, { recursive: true });
  }
});
