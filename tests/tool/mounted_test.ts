/** The design tests again through a real FUSE mount: cortexfsd serves the tree, tsh sees it at /ctx. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { fixture } from "./fixture.ts";

const repo = new URL("../../", import.meta.url).pathname;

Deno.test("through a mounted /ctx: no host PATH fallback, /workspace + /home/agent, .git EROFS, perm r-- runs nothing", async () => {
  if (Deno.uid() !== 0) return; // /dev/fuse is 0600 here: mounting needs root; CI runs as root
  const f = await fixture();
  const mnt = `${f.storage}/mnt`, run = `${f.storage}/run`;
  Deno.mkdirSync(mnt);
  Deno.mkdirSync(run);
  const daemon = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${repo}cli/cortexfsd.ts`,
      "--storage",
      f.storage,
      "--mount",
      mnt,
      "--run",
      run,
      "--ttl",
      "0",
    ],
    cwd: repo,
    stdout: "null",
    stderr: "null",
  }).spawn(); // deno-fmt-ignore
  try {
    let up = false;
    for (let i = 0; i < 150 && !up; i++) {
      try {
        up = Deno.statSync(`${mnt}/agent/coder`).isFile;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    assert(up, "cortexfsd did not mount");
    // The mount is a projection: HOME is backed by the storage path.
    const o = { root: mnt, agent: "coder", uid: 0, workspace: f.ws, home: `${f.root}/home/0/agent/coder` };
    assertEquals((await runTsh(["ls"], o)).errno, "ENOENT");
    const r = await runTsh([
      "bash",
      "pwd; echo $HOME; cat /ctx/agent/coder.d/perm; touch /workspace/.git/x 2>&1 | grep -o 'Read-only file system'; echo ok > /workspace/w",
    ], o);
    assertEquals(r.content, "/workspace\n/home/agent\nrwx\nRead-only file system\n");
    assertEquals(Deno.readTextFileSync(`${f.ws}/w`), "ok\n");
    replaceFile(`${f.root}/agent/coder.d/perm`, "r--\n");
    const d = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals([d.errno, d.exitCode], ["EACCES", 13]);
    let marker = true;
    try {
      Deno.statSync(`${f.ws}/marker`);
    } catch {
      marker = false;
    }
    assertEquals(marker, false);
  } finally {
    daemon.kill("SIGTERM");
    await daemon.status;
    await new Deno.Command("fusermount3", { args: ["-u", mnt] }).output().catch(() => {});
    await f.cleanup();
  }
});
