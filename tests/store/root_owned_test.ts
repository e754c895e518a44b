/** Migration 3 `root-owned-definitions`: a real `ctx storage update` takes an old tree's user-owned definitions over for root. */
import { lchownSync } from "node:fs";
import { assert, assertEquals } from "../assert.ts";
import { ctxRun } from "../fixture/mod.ts";
import { type Entry, snapshot } from "./snapshot.ts";
import { readBootstrap } from "../../src/store/bootstrap.ts";
import { update } from "../../src/store/generation.ts";
import { MIGRATIONS } from "../../src/store/migrate.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { rootOwnDefinitions } from "../../src/store/root_owned.ts";
import { treeProblems } from "../../src/store/validate.ts";

const root = Deno.uid() === 0;
const U = 1000;
const ctxNow = { uid: 0, gid: 0, now: 0 };

/**
 * A tree_version 2 storage root as binaries before migration 3 left it: agent `bob` of uid 1000
 * with its definition (entry, `.d/`, controls) owned by the uid, one control world-writable and
 * one set-uid, as `ctx agent new` through the mount made them.
 */
async function v2Storage(): Promise<string> {
  const s = await Deno.makeTempDir({ prefix: "ctx-own-" });
  Deno.chmodSync(s, 0o755); // the uid reaches its home, as in a real storage root
  update(s, { migrations: MIGRATIONS.slice(0, 2) });
  const cur = Deno.realPathSync(`${s}/current`);
  createAgent(cur, "bob", { uid: U, gid: U });
  for (const p of ["agent/bob", "agent/bob.d"]) Deno.chownSync(`${cur}/${p}`, U, U);
  for (const e of Deno.readDirSync(`${cur}/agent/bob.d`)) {
    Deno.chownSync(`${cur}/agent/bob.d/${e.name}`, U, U);
  }
  Deno.chmodSync(`${cur}/agent/bob.d/perm`, 0o666);
  Deno.chmodSync(`${cur}/agent/bob`, 0o4755);
  return s;
}

/** What a definition entry must be after the migration: root's, dirs 0755, no write for others. */
function rootOwned(snap: Record<string, Entry>): string[] {
  const bad: string[] = [];
  for (const [k, e] of Object.entries(snap)) {
    if (!/^(agent|tool|model|bin)(\/|$)/.test(k)) continue;
    const ok = e.uid === 0 && e.gid === 0 &&
      (e.type === "symlink" || (e.type === "dir" ? e.mode === 0o755 : (e.mode & ~0o755) === 0));
    if (!ok) bad.push(`${k} ${e.type} ${e.mode.toString(8)} ${e.uid}:${e.gid}`);
  }
  return bad;
}

Deno.test({
  name:
    "storage update 2 -> 5 (migration 3) makes every definition root's with safe modes; bytes, homes and owner controls stay",
  ignore: !root,
  async fn() {
    const s = await v2Storage();
    try {
      const old = snapshot(Deno.realPathSync(`${s}/current`));
      assertEquals(rootOwned(old).length > 5, true); // the old tree really had user-owned entries
      const r = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } });
      assertEquals(r, {
        code: 0,
        stdout: "created generation 2 (tree_version 2 -> 5)\napply 3 root-owned-definitions\n" +
          "apply 4 secret-control-modes\napply 5 debug-script-model\n" +
          "switched current -> generations/2\n",
        stderr: "",
      });
      const dir = Deno.realPathSync(`${s}/current`);
      assertEquals(treeProblems(dir, { bootstrap: true, treeVersion: 5 }), []);
      assertEquals(readBootstrap(dir).applied_migrations.slice(-3), [
        { version: 3, id: "root-owned-definitions" },
        { version: 4, id: "secret-control-modes" },
        { version: 5, id: "debug-script-model" },
      ]);
      const now = snapshot(dir);
      assertEquals(rootOwned(now), []);
      assertEquals(
        [now["agent/bob"].mode, now["agent/bob.d/perm"].mode, now["agent/bob.d/uid"].mode],
        [0o755, 0o644, 0o644],
      );
      // Same bytes everywhere; the agent is still bob's; its home is still the uid's.
      const data = (snap: Record<string, Entry>) =>
        Object.fromEntries(
          // migration 5 adds model/debug/script (and so model/debug changes)
          Object.entries(snap).filter(([k]) =>
            k !== "bin/cortexfs.bootstrap.json" && !k.startsWith("model/debug/script") &&
            k !== "model/debug"
          ).map((
            [k, e],
          ) => [k, e.data]),
        );
      assertEquals(data(now), data(old));
      assertEquals(now["agent/bob.d/owner"].data, "1000\n");
      const home = (snap: Record<string, Entry>) =>
        Object.entries(snap).filter(([k]) => k.startsWith("home/")).map((
          [k, e],
        ) => [k, e.type, e.mode, e.uid, e.gid]);
      assertEquals(home(now), home(old));
      assertEquals(home(now).some(([k, , , uid]) => k === "home/1000" && uid === U), true);
      // Nothing left to do.
      const again = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } });
      assertEquals(again.stdout, "up to date: tree_version 5 (current -> generations/2)\n");
    } finally {
      await Deno.remove(s, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "rootOwnDefinitions() replaces a taken-over file: a write fd its old owner kept, and other hard links, reach nothing",
  ignore: !root,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "ctx-own-" });
    try {
      Deno.mkdirSync(`${dir}/agent/x.d`, { recursive: true });
      Deno.chownSync(`${dir}/agent/x.d`, U, U);
      Deno.writeTextFileSync(`${dir}/agent/x.d/uid`, "1000\n", { mode: 0o644 });
      Deno.chmodSync(`${dir}/agent/x.d/uid`, 0o644);
      Deno.chownSync(`${dir}/agent/x.d/uid`, U, U);
      // An outside root-only file hard-linked into the definition (kernels without
      // protected_hardlinks let a user do this).
      Deno.writeTextFileSync(`${dir}/secret`, "ROOT ONLY\n", { mode: 0o600 });
      Deno.chmodSync(`${dir}/secret`, 0o600);
      Deno.linkSync(`${dir}/secret`, `${dir}/agent/x.d/policy`);
      Deno.symlinkSync("x", `${dir}/agent/main`);
      lchownSync(`${dir}/agent/main`, U, U);
      const kept = Deno.openSync(`${dir}/agent/x.d/uid`, { write: true }); // the old owner's fd
      try {
        rootOwnDefinitions(dir, ctxNow);
        kept.writeSync(new TextEncoder().encode("0\n\n\n"));
      } finally {
        kept.close();
      }
      const st = (p: string) => {
        const x = Deno.lstatSync(`${dir}/${p}`);
        return [(x.mode ?? 0) & 0o7777, x.uid, x.gid, x.nlink];
      };
      assertEquals(Deno.readTextFileSync(`${dir}/agent/x.d/uid`), "1000\n");
      assertEquals(
        [st("agent/x.d"), st("agent/x.d/uid"), st("agent/x.d/policy"), st("secret")],
        [[0o755, 0, 0, 2], [0o644, 0, 0, 1], [0o600, 0, 0, 1], [0o600, 0, 0, 1]],
      );
      assert(Deno.lstatSync(`${dir}/agent/main`).uid === 0);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
