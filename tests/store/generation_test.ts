/** `ctx storage update` end to end: a real child process on a temp storage root. */
import { assert, assertEquals, assertStringIncludes } from "../assert.ts";
import { ctxRun } from "../fixture/mod.ts";
import { names, snapshot } from "./snapshot.ts";
import { treeProblems } from "../../src/store/validate.ts";
import { readBootstrap, writeBootstrap } from "../../src/store/bootstrap.ts";
import { currentGeneration, update } from "../../src/store/generation.ts";
import { MIGRATIONS } from "../../src/store/migrate.ts";
import { TSH_CONFIG } from "../../src/store/tree.ts";
import { CtxError } from "../../src/abi/errno.ts";

const EXTRA = { CORTEXFS_TEST_EXTRA_MIGRATION: "1" };

async function withStorage(fn: (storage: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ctx-storage-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function updateCmd(storage: string, flags: string[] = [], env: Record<string, string> = {}) {
  return ctxRun(["storage", "update", ...flags], { env: { CORTEXFS_STORAGE: storage, ...env } });
}

Deno.test("storage update on an empty root creates generation 1 holding a valid tree", async () => {
  await withStorage(async (s) => {
    const r = await updateCmd(s);
    assertEquals(r, {
      code: 0,
      stdout: "created generation 1 (tree_version 0 -> 5)\napply 1 initial-tree\n" +
        "apply 2 tsh-config\napply 3 root-owned-definitions\napply 4 secret-control-modes\n" +
        "apply 5 debug-script-model\nswitched current -> generations/1\n",
      stderr: "",
    });
    assertEquals(names(s), [".lock", "current", "generations"]);
    assertEquals(Deno.readLinkSync(`${s}/current`), "generations/1");
    assertEquals(names(`${s}/generations`), ["1"]);
    assertEquals(currentGeneration(s), `${Deno.realPathSync(s)}/generations/1`);
    assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 5 }), []);
    assertEquals(readBootstrap(`${s}/current`), {
      schema: "cortexfs.bootstrap/v1",
      tree_version: 5,
      applied_migrations: [
        { version: 1, id: "initial-tree" },
        { version: 2, id: "tsh-config" },
        { version: 3, id: "root-owned-definitions" },
        { version: 4, id: "secret-control-modes" },
        { version: 5, id: "debug-script-model" },
      ],
    });
    // A new tree gets tool/tsh.d/config through the same pipeline as an upgraded one.
    assertEquals(Deno.readTextFileSync(`${s}/current/tool/tsh.d/config`), TSH_CONFIG);
  });
});

Deno.test("storage update with nothing to do changes nothing", async () => {
  await withStorage(async (s) => {
    assertEquals((await updateCmd(s)).code, 0);
    const before = snapshot(s);
    const r = await updateCmd(s);
    assertEquals(r, {
      code: 0,
      stdout: "up to date: tree_version 5 (current -> generations/1)\n",
      stderr: "",
    });
    assertEquals(snapshot(s), before);
  });
});

Deno.test("storage update --check answers by exit code and writes nothing", async () => {
  await withStorage(async (s) => {
    const empty = await updateCmd(s, ["--check"]);
    assertEquals(empty, {
      code: 1,
      stdout: "update needed: tree_version 0 -> 5\npending 1 initial-tree\npending 2 tsh-config\n" +
        "pending 3 root-owned-definitions\npending 4 secret-control-modes\npending 5 debug-script-model\n",
      stderr: "",
    });
    assertEquals(names(s), []);
    await updateCmd(s);
    const before = snapshot(s);
    assertEquals(await updateCmd(s, ["--check"]), {
      code: 0,
      stdout: "up to date: tree_version 5\n",
      stderr: "",
    });
    assertEquals(await updateCmd(s, ["--check"], EXTRA), {
      code: 1,
      stdout: "update needed: tree_version 5 -> 6\npending 6 test-marker\n",
      stderr: "",
    });
    assertEquals(snapshot(s), before);
  });
});

Deno.test("storage update --dry-run reports the plan and writes nothing", async () => {
  await withStorage(async (s) => {
    await updateCmd(s);
    Deno.mkdirSync(`${s}/generations/.7.tmp-1-dead`); // a half-built leftover
    const before = snapshot(s);
    const r = await updateCmd(s, ["--dry-run", "--prune"], EXTRA);
    assertEquals(r, {
      code: 0,
      stdout: "would create generation 2 (tree_version 5 -> 6)\nwould apply 6 test-marker\n" +
        "would switch current -> generations/2\nwould prune generations/.7.tmp-1-dead\n" +
        "would prune generations/1\n",
      stderr: "",
    });
    assertEquals(snapshot(s), before);
  });
});

Deno.test("storage update applies a pending migration into a new generation, keeping the old", async () => {
  await withStorage(async (s) => {
    await updateCmd(s);
    const old = snapshot(`${s}/generations/1`);
    const r = await updateCmd(s, [], EXTRA);
    assertEquals(r, {
      code: 0,
      stdout: "created generation 2 (tree_version 5 -> 6)\napply 6 test-marker\n" +
        "switched current -> generations/2\n",
      stderr: "",
    });
    assertEquals(Deno.readLinkSync(`${s}/current`), "generations/2");
    assertEquals(snapshot(`${s}/generations/1`), old);
    assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 6 }), []);
    assertEquals(readBootstrap(`${s}/current`).applied_migrations, [
      { version: 1, id: "initial-tree" },
      { version: 2, id: "tsh-config" },
      { version: 3, id: "root-owned-definitions" },
      { version: 4, id: "secret-control-modes" },
      { version: 5, id: "debug-script-model" },
      { version: 6, id: "test-marker" },
    ]);
    assertEquals(
      Deno.readTextFileSync(`${s}/current/shared/cortexfs-test/marker`),
      "tree_version 6\n",
    );
  });
});

Deno.test("storage update --prune removes every non-current generation and leftovers", async () => {
  await withStorage(async (s) => {
    await updateCmd(s);
    await updateCmd(s, [], EXTRA);
    Deno.mkdirSync(`${s}/generations/.3.tmp-99-beef`);
    Deno.symlinkSync("generations/1", `${s}/.current.tmp-99-beef`);
    Deno.writeTextFileSync(`${s}/generations/notes`, "not ours\n"); // unknown names are left alone
    const r = await updateCmd(s, ["--prune"], EXTRA);
    assertEquals(r, {
      code: 0,
      stdout: "up to date: tree_version 6 (current -> generations/2)\n" +
        "pruned generations/.3.tmp-99-beef\npruned generations/1\npruned .current.tmp-99-beef\n",
      stderr: "",
    });
    assertEquals(names(`${s}/generations`), ["2", "notes"]);
    assertEquals(names(s), [".lock", "current", "generations"]);
    assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 6 }), []);
  });
});

Deno.test("storage update refuses an on-disk tree_version newer than the binary", async () => {
  await withStorage(async (s) => {
    await updateCmd(s);
    writeBootstrap(`${s}/current`, {
      schema: "cortexfs.bootstrap/v1",
      tree_version: 99,
      applied_migrations: [],
    });
    const before = snapshot(s);
    for (const flags of [[], ["--check"], ["--dry-run"], ["--prune"]]) {
      assertEquals(await updateCmd(s, flags), {
        code: 1,
        stdout: "",
        stderr: `ctx: ENOTSUP: ${s}/current: on-disk tree_version 99 is newer than this ` +
          "binary's 5; refusing to touch it\n",
      });
    }
    assertEquals(snapshot(s), before);
  });
});

Deno.test({
  name: "storage update clones owners, modes, symlinks and times of other users' files",
  ignore: Deno.uid() !== 0, // needs root to own files as another uid; CI runs as root
  fn: async () => {
    await withStorage(async (s) => {
      await updateCmd(s);
      const home = `${s}/current/home/4321`;
      Deno.mkdirSync(`${home}/notes`, { recursive: true });
      Deno.writeTextFileSync(`${home}/notes/a.txt`, "private\n");
      Deno.chmodSync(`${home}/notes/a.txt`, 0o640);
      Deno.chmodSync(`${home}/notes`, 0o700);
      Deno.symlinkSync("notes/a.txt", `${home}/link`);
      Deno.writeTextFileSync(`${home}/.x.tmp-1-2`, "user data, not debris\n");
      Deno.utimeSync(`${home}/notes/a.txt`, new Date(1e12), new Date(1e12));
      new Deno.Command("chown", { args: ["-hR", "4321:4322", home] }).outputSync();
      const before = snapshot(home);
      assertEquals((await updateCmd(s, [], EXTRA)).code, 0);
      assertEquals(Deno.readLinkSync(`${s}/current`), "generations/2");
      const after = snapshot(`${s}/generations/2/home/4321`);
      // Directory mtimes change when entries are created in them; compare everything else.
      const strip = (x: ReturnType<typeof snapshot>) =>
        Object.fromEntries(
          Object.entries(x).map(([k, v]) => [k, v.type === "dir" ? { ...v, mtime: 0 } : v]),
        );
      assertEquals(strip(after), strip(before));
      assertEquals(after["notes/a.txt"].uid, 4321);
    });
  },
});

/** A snapshot where only the generations/ directory's own mtime (temp dirs came and went) is ignored. */
function settled(dir: string) {
  const snap = snapshot(dir);
  snap["generations"] = { ...snap["generations"], mtime: 0 };
  return snap;
}

Deno.test("update() leaves current untouched when a migration fails or yields an invalid tree", async () => {
  await withStorage(async (s) => {
    update(s);
    const before = settled(s);
    const failing = [...MIGRATIONS, {
      version: 6,
      id: "boom",
      apply() {
        throw new CtxError("EIO", "disk on fire");
      },
    }];
    let e = await Promise.resolve().then(() => update(s, { migrations: failing })).catch((x) => x);
    assert(e instanceof CtxError);
    assertEquals([e.errno, e.message], ["EIO", "migration 6 (boom) failed: disk on fire"]);
    assertEquals(settled(s), before);

    const invalid = [...MIGRATIONS, {
      version: 6,
      id: "memory-root",
      apply(dir: string) {
        Deno.mkdirSync(`${dir}/memory`); // a forbidden root class
      },
    }];
    e = await Promise.resolve().then(() => update(s, { migrations: invalid })).catch((x) => x);
    assert(e instanceof CtxError);
    assertEquals(e.errno, "EINVAL");
    assertStringIncludes(
      e.message,
      "root entries are [agent bin home memory model shared status tool]",
    );
    assertEquals(settled(s), before);
  });
});
