/** Issue 8, hole 2 (run dir): with the run dir and storage inside the workspace (as `deno task dev` lays them out), a sandbox sees neither and cannot move them. */
import { assertEquals } from "../assert.ts";
import { update } from "../../src/store/generation.ts";
import { openTempDir, probe, type Target, withTarget } from "../fixture/mod.ts";

/** `deno task dev`'s layout: `<dir>/checkout/.dev/{storage,run}`, the mount at `<dir>/mnt`. */
async function devLayout(): Promise<Target["tree"]> {
  const dir = await openTempDir("cortexfs-dev-");
  const checkout = `${dir}/checkout`;
  const storage = `${checkout}/.dev/storage`, run = `${checkout}/.dev/run`;
  const mount = `${dir}/mnt`, logs = `${dir}/logs`;
  await Deno.mkdir(run, { recursive: true });
  await Deno.mkdir(mount);
  await Deno.mkdir(logs);
  await Deno.writeTextFile(`${checkout}/main.ts`, "code\n");
  update(storage, { uid: 0, gid: 0 });
  return { dir, storage, mount, run, logs, root: Deno.realPathSync(`${storage}/current`) };
}

/** The checkout: the workspace of a developer running `ctx` from it. */
const checkout = (t: Target) => `${t.tree.dir}/checkout`;

Deno.test("with .dev/run and .dev/storage in the workspace, /workspace/.dev is an empty read-only mask that cannot be moved", async () => {
  await withTarget(async (t) => {
    const sock = `${t.tree.run}/agent/coder.sock`;
    const [seen] = await Promise.all([
      probe(
        t,
        [
          `echo "dev: $(ls -A /workspace/.dev | wc -l)"`,
          "err run ls /workspace/.dev/run",
          `echo "sockets: $(find /workspace -name '*.sock' | wc -l)"`,
          `echo "all sockets: $(find / \\( -path /proc -o -path /sys -o -path /usr \\) -prune -o -type s -print | wc -l)"`,
          "find /workspace | sort",
          "err mv mv /workspace/.dev /workspace/dev.old",
          "err write bash -c 'echo x > /workspace/.dev/x'",
          "err mkdir mkdir /workspace/.dev/run",
          "err code bash -c 'echo more >> /workspace/main.ts'",
        ].join("\n"),
        checkout(t),
      ),
      t.bystander(),
    ]);
    assertEquals(seen, [
      "dev: 0",
      "run: No such file or directory",
      "sockets: 0",
      "all sockets: 0",
      "/workspace",
      "/workspace/.dev",
      "/workspace/.git", // the empty read-only .git every writable workspace root gets (spec/sandbox.md)
      "/workspace/main.ts",
      "mv: Device or resource busy",
      "write: Read-only file system",
      "mkdir: Read-only file system",
      "code: ok",
    ]);
    // The host's own run dir and storage are untouched, the daemon still answers.
    assertEquals(Deno.lstatSync(sock).isSocket, true);
    assertEquals(Deno.realPathSync(`${t.tree.storage}/current`), t.tree.root);
    assertEquals(await Deno.readTextFile(`${checkout(t)}/main.ts`), "code\nmore\n");
    assertEquals((await t.ctx(["agent", "send", "coder", "hi"])).stdout, "hi\n");
    await t.bystander();
  }, { tree: devLayout });
});

Deno.test("a workspace at .dev itself: its run/ and storage/ are masked, and cannot be moved", async () => {
  await withTarget(async (t) => {
    const [seen] = await Promise.all([
      probe(
        t,
        [
          `echo "run: $(ls -A /workspace/run | wc -l) storage: $(ls -A /workspace/storage | wc -l)"`,
          "err mv-run mv /workspace/run /workspace/run.old",
          "err mv-storage mv /workspace/storage /workspace/storage.old",
          "err plant bash -c 'echo x > /workspace/run/agent'",
        ].join("\n"),
        `${checkout(t)}/.dev`,
      ),
      t.bystander(),
    ]);
    assertEquals(seen, [
      "run: 0 storage: 0",
      "mv-run: Device or resource busy",
      "mv-storage: Device or resource busy",
      "plant: Read-only file system",
    ]);
    await t.bystander();
  }, { tree: devLayout });
});

Deno.test("a cwd inside the run dir or the storage (its backing tree included) is refused EACCES and nothing runs", async () => {
  await withTarget(async (t) => {
    const cwds = [
      { cwd: t.tree.run, hidden: t.tree.run },
      { cwd: `${t.tree.run}/agent`, hidden: t.tree.run },
      { cwd: t.tree.storage, hidden: t.tree.storage },
      { cwd: `${t.tree.storage}/generations`, hidden: t.tree.storage },
      // The backing tree is storage too: a client's cwd there would bypass the mount's rules
      // (root-owned definitions, validated controls) and reach session history directly.
      { cwd: t.tree.root, hidden: t.tree.storage },
      { cwd: `${t.tree.root}/agent`, hidden: t.tree.storage },
      { cwd: `${t.tree.root}/home`, hidden: t.tree.storage },
    ];
    for (const { cwd, hidden } of cwds) {
      const [r] = await Promise.all([
        t.ctx(["agent", "tsh", "coder", "--", "bash", "echo ran > /workspace/ran"], { cwd }),
        t.bystander(),
      ]);
      assertEquals({ code: r.code, stdout: r.stdout, first: r.stderr.split("\n")[0] }, {
        code: 13,
        stdout: "",
        first:
          `EACCES: "/workspace" (from "${cwd}") lies in CortexFS's private state ("${hidden}")`,
      });
      assertEquals(await Deno.lstat(`${cwd}/ran`).then(() => "exists", () => "absent"), "absent");
    }
    await t.bystander();
  }, { tree: devLayout });
});
