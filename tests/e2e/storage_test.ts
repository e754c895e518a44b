/** `ctx storage update` against a running cortexfsd: updates wait for the restart boundary. */
import { assertEquals, assertMatch } from "../assert.ts";
import { cleanup, ctxRun, type Daemon, makeTree, startDaemon } from "../fixture/mod.ts";
import { mountedType } from "../../src/fuse/mount.ts";
import { update } from "../../src/store/generation.ts";
import { MIGRATIONS } from "../../src/store/migrate.ts";

Deno.test("storage update refuses (EBUSY) while cortexfsd serves current; after the stop it updates and prunes", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  const env = { CORTEXFS_STORAGE: tree.storage, CORTEXFS_TEST_EXTRA_MIGRATION: "1" };
  try {
    d = await startDaemon(tree);
    const busy = await ctxRun(["storage", "update", "--prune"], { env });
    assertEquals(busy.code, 1);
    assertMatch(busy.stderr, /^ctx: EBUSY: .*current: a running cortexfsd serves generation 1/);
    assertEquals(Deno.readLinkSync(`${tree.storage}/current`), "generations/1");
    assertEquals([...Deno.readDirSync(`${tree.storage}/generations`)].map((e) => e.name), ["1"]);
    // Checks and dry runs only read: they still answer.
    assertEquals((await ctxRun(["storage", "update", "--check"], { env })).code, 1);

    assertEquals(await d.stop(), 0);
    d = null;
    const ok = await ctxRun(["storage", "update", "--prune"], { env });
    assertEquals({ code: ok.code, stderr: ok.stderr }, { code: 0, stderr: "" });
    assertEquals(Deno.readLinkSync(`${tree.storage}/current`), "generations/2");
    const left = [...Deno.readDirSync(tree.storage)].map((e) => e.name).sort();
    assertEquals(left.filter((n) => n.startsWith(".serving")), []);
    assertEquals([...Deno.readDirSync(`${tree.storage}/generations`)].map((e) => e.name), ["2"]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("cortexfsd refuses (exit 69) to serve a tree older than itself; after ctx storage update it serves", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-old-" });
  const tree = {
    dir,
    storage: `${dir}/storage`,
    mount: `${dir}/mnt`,
    run: `${dir}/run`,
  };
  Deno.mkdirSync(tree.mount);
  let d: Daemon | null = null;
  try {
    update(tree.storage, { migrations: MIGRATIONS.slice(0, -1) }); // what an older binary made
    const old = await startDaemon(tree, { wait: false });
    assertEquals((await old.child.status).code, 69);
    await old.stop(); // collects its log
    assertMatch(
      old.log(),
      /tree_version \d+ is older than this binary's \d+: run `ctx storage update`/,
    );
    assertEquals(mountedType(tree.mount), null);
    const up = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: tree.storage } });
    assertEquals(up.code, 0, up.stderr);
    d = await startDaemon(tree);
    assertEquals(mountedType(tree.mount) !== null, true);
  } finally {
    await cleanup(tree, d);
  }
});
