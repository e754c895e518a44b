/** Migrations 2 `tsh-config`, 4 `secret-control-modes` and 5 `debug-script-model`: a real `ctx storage update` brings a tree_version 1 tree to the latest. */
import { assertEquals } from "../assert.ts";
import { ctxRun } from "../fixture/mod.ts";
import { type Entry, names, snapshot } from "./snapshot.ts";
import { readBootstrap } from "../../src/store/bootstrap.ts";
import { update } from "../../src/store/generation.ts";
import { checkRegistry, latestVersion, MIGRATIONS } from "../../src/store/migrate.ts";
import { TSH_CONFIG } from "../../src/store/tree.ts";
import { treeProblems } from "../../src/store/validate.ts";
import { readTshConfig, TSH_DEFAULTS } from "../../src/tool/config.ts";

/** A storage root whose current generation is at tree_version 1 (the v1 registry of old binaries). */
async function v1Storage(): Promise<string> {
  const s = await Deno.makeTempDir({ prefix: "ctx-mig-" });
  update(s, { migrations: MIGRATIONS.slice(0, 1) });
  assertEquals(readBootstrap(`${s}/current`).tree_version, 1);
  return s;
}

/** A snapshot without what an upgrade is expected to touch (bootstrap, tool/tsh.d, env modes, dir mtimes). */
function untouched(dir: string): Record<string, Entry> {
  const out: Record<string, Entry> = {};
  for (const [k, v] of Object.entries(snapshot(Deno.realPathSync(dir)))) {
    if (k === "bin/cortexfs.bootstrap.json" || k.startsWith("tool/tsh.d")) continue;
    // migration 4 makes the secret controls 0600
    if (k === "agent/coder.d/env" || k === "agent/coder.d/log") continue;
    if (k.startsWith("model/debug/script")) continue; // migration 5 adds it
    if (k === "model/debug") continue; // its mtime changes with the new entries
    out[k] = v.type === "dir" ? { ...v, mtime: 0 } : v;
  }
  return out;
}

Deno.test("the registry is 1 initial-tree, 2 tsh-config, 3 root-owned-definitions, 4 secret-control-modes, 5 debug-script-model", () => {
  checkRegistry(MIGRATIONS);
  assertEquals(MIGRATIONS.map((m) => [m.version, m.id]), [
    [1, "initial-tree"],
    [2, "tsh-config"],
    [3, "root-owned-definitions"],
    [4, "secret-control-modes"],
    [5, "debug-script-model"],
  ]);
  assertEquals(latestVersion(MIGRATIONS), 5);
});

Deno.test("storage update brings a tree_version 1 tree to 5: tool/tsh.d/config added, env made 0600, model/debug/script added, nothing else changed (v3 has nothing to take over in a tree root built)", async () => {
  const s = await v1Storage();
  try {
    assertEquals(names(`${s}/current/tool`).includes("tsh.d"), false);
    const before = untouched(`${s}/current`);
    const r = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } });
    assertEquals(r, {
      code: 0,
      stdout: "created generation 2 (tree_version 1 -> 5)\napply 2 tsh-config\n" +
        "apply 3 root-owned-definitions\napply 4 secret-control-modes\n" +
        "apply 5 debug-script-model\n" +
        "switched current -> generations/2\n",
      stderr: "",
    });
    const dir = Deno.realPathSync(`${s}/current`);
    assertEquals(treeProblems(dir, { bootstrap: true, treeVersion: 5 }), []);
    assertEquals(readBootstrap(dir).applied_migrations, [
      { version: 1, id: "initial-tree" },
      { version: 2, id: "tsh-config" },
      { version: 3, id: "root-owned-definitions" },
      { version: 4, id: "secret-control-modes" },
      { version: 5, id: "debug-script-model" },
    ]);
    const snap = snapshot(dir);
    assertEquals(
      {
        dir: { ...snap["tool/tsh.d"], mtime: 0 },
        config: { ...snap["tool/tsh.d/config"], mtime: 0 },
      },
      {
        dir: { type: "dir", mode: 0o755, uid: Deno.uid(), gid: Deno.gid(), mtime: 0 },
        config: {
          type: "file",
          mode: 0o644,
          uid: Deno.uid(),
          gid: Deno.gid(),
          mtime: 0,
          data: TSH_CONFIG,
        },
      },
    );
    // tsh's own parser reads exactly the documented defaults from it.
    assertEquals(readTshConfig(dir), { ...TSH_DEFAULTS });
    assertEquals(readTshConfig(dir), {
      cache_capacity: 32,
      max_loaded_tools: 64,
      window_percent: 1,
    });
    assertEquals(untouched(dir), before);
    // The default agent's env and log: 0644 in the v1 tree, 0600 now, bytes and owner unchanged.
    for (const c of ["env", "log"]) {
      assertEquals(
        [snapshot(`${s}/generations/1`)[`agent/coder.d/${c}`], snap[`agent/coder.d/${c}`]]
          .map((e) => ({ ...e, mtime: 0 })),
        [0o644, 0o600].map((mode): Entry => ({
          type: "file",
          mode,
          uid: Deno.uid() ?? -1,
          gid: Deno.gid() ?? -1,
          mtime: 0,
          data: "",
        })),
        c,
      );
    }
    assertEquals(Object.keys(before).length > 50, true); // a real tree was compared, not a link
    // Running it again has nothing to do.
    const again = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } });
    assertEquals(again.stdout, "up to date: tree_version 5 (current -> generations/2)\n");
  } finally {
    await Deno.remove(s, { recursive: true });
  }
});

Deno.test("tsh-config keeps an operator's valid config; a malformed one fails the update and current stays", async () => {
  const s = await v1Storage();
  try {
    // Operators may have made the file by hand before the migration existed.
    Deno.mkdirSync(`${s}/current/tool/tsh.d`);
    Deno.writeTextFileSync(`${s}/current/tool/tsh.d/config`, "cache_capacity=5\n");
    assertEquals((await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } })).code, 0);
    assertEquals(Deno.readTextFileSync(`${s}/current/tool/tsh.d/config`), "cache_capacity=5\n");
    assertEquals(readBootstrap(`${s}/current`).tree_version, 5);

    const t = await v1Storage();
    try {
      Deno.mkdirSync(`${t}/current/tool/tsh.d`);
      Deno.writeTextFileSync(`${t}/current/tool/tsh.d/config`, "cache_capacity=lots\n");
      const before = snapshot(`${t}/generations/1`);
      const r = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: t } });
      assertEquals(r, {
        code: 2,
        stdout: "",
        stderr: "ctx: EINVAL: tool/tsh.d/config: migration 2 (tsh-config) failed: tsh-config " +
          'keeps an existing config only when it is valid: "tool/tsh.d/config": line 1: ' +
          'cache_capacity="lots" is not an integer 1..1024\n',
      });
      assertEquals(Deno.readLinkSync(`${t}/current`), "generations/1");
      assertEquals(names(`${t}/generations`), ["1"]);
      assertEquals(snapshot(`${t}/generations/1`), before);
    } finally {
      await Deno.remove(t, { recursive: true });
    }
  } finally {
    await Deno.remove(s, { recursive: true });
  }
});

Deno.test("tree validation checks tool/tsh.d/config: a malformed config or a stray file is a problem", async () => {
  const s = await Deno.makeTempDir({ prefix: "ctx-mig-" });
  try {
    update(s);
    const cur = Deno.realPathSync(`${s}/current`);
    assertEquals(treeProblems(cur), []);
    Deno.writeTextFileSync(`${cur}/tool/tsh.d/config`, "cache_capacity=0\n");
    Deno.writeTextFileSync(`${cur}/tool/tsh.d/extra`, "x\n");
    assertEquals(treeProblems(cur).map((e) => [e.errno, e.path]), [
      ["EINVAL", "tool/tsh.d/config"],
      ["EINVAL", "tool/tsh.d/extra"],
    ]);
  } finally {
    await Deno.remove(s, { recursive: true });
  }
});

Deno.test("debug-script-model adds model/debug/script (controls first, entry 0555) and keeps one that exists", async () => {
  const s = await v1Storage();
  try {
    assertEquals((await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } })).code, 0);
    const d = Deno.realPathSync(`${s}/current/model/debug`);
    assertEquals(names(`${d}/script.d`), [
      "cap",
      "default",
      "driver",
      "effort",
      "fallback",
      "limit",
      "session",
    ]);
    assertEquals(Deno.readTextFileSync(`${d}/script.d/driver`), "debug-script\n");
    assertEquals(Deno.readTextFileSync(`${d}/script.d/default`), "script=script.jsonl\n");
    assertEquals(Deno.readTextFileSync(`${d}/script.d/limit`), "131072\n");
    assertEquals((Deno.statSync(`${d}/script`).mode ?? 0) & 0o7777, 0o555);
    const entry = Deno.readTextFileSync(`${d}/script`);
    assertEquals(entry.split("\n").slice(0, 3), [
      "#!/usr/bin/cortexfs-object-runner",
      "id=debug/script",
      "name=script",
    ]);
  } finally {
    await Deno.remove(s, { recursive: true });
  }
  const t = await v1Storage();
  try {
    // An operator's own debug/script stays as it was.
    Deno.mkdirSync(`${t}/current/model/debug/script.d`);
    Deno.writeTextFileSync(`${t}/current/model/debug/script.d/driver`, "debug\n");
    Deno.writeTextFileSync(`${t}/current/model/debug/script`, "mine\n");
    assertEquals((await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: t } })).code, 0);
    assertEquals(names(`${t}/current/model/debug/script.d`), ["driver"]);
    assertEquals(Deno.readTextFileSync(`${t}/current/model/debug/script`), "mine\n");
  } finally {
    await Deno.remove(t, { recursive: true });
  }
});
