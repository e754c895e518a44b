/** Issue 8 hole 6: what sandboxed processes create is 0644/0755, even when the daemon runs (and serves) with umask 0. */
import { assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { type Target, withTarget } from "../fixture/mod.ts";

/** cortexfsd started the way a careless unit file might: umask 0 for the whole process. */
const UMASK0 = ["bash", "-c", 'umask 0; exec "$@"', "umask0"];

// An sdk-envelope-v1 agent that creates a file, a file by redirection and a directory in its
// workspace with no explicit mode (what it gets is 0666 or 0777 less the umask), then answers.
const MAKER = `#!/bin/bash
IFS= read -r line
touch /workspace/agent-touch
echo x >/workspace/agent-redirect
mkdir /workspace/agent-dir
printf '{"type":"message","role":"assistant","content":"made"}\\n'
`;

/** `mode & 0o7777` of each name under `dir`, as octal strings. */
function modes(dir: string, names: string[]): Record<string, string> {
  return Object.fromEntries(
    names.map((n) => [n, ((Deno.lstatSync(`${dir}/${n}`).mode ?? 0) & 0o7777).toString(8)]),
  );
}

/** The umask of the daemon's main thread (its process umask), from /proc. */
function daemonUmask(t: Target): string {
  const status = Deno.readTextFileSync(`/proc/${t.daemon.child.pid}/status`);
  return /^Umask:\s+(\d+)$/m.exec(status)?.[1] ?? "none";
}

async function check(t: Target, ws: string): Promise<void> {
  // tsh bash: a redirection, touch, mkdir and mkdir -p, with no mode given.
  const made = await t.ctx([
    "agent",
    "tsh",
    "coder",
    "--",
    "bash",
    "echo x >bash-redirect; touch bash-touch; mkdir bash-dir; mkdir -p bash-p/q",
  ], { cwd: ws });
  assertEquals(made.code, 0, made.stderr);
  // fs.write: a new file.
  const wrote = await t.ctx(["agent", "tsh", "coder", "--", "fs.write", "fs-write", "content"], {
    cwd: ws,
  });
  assertEquals(wrote.code, 0, wrote.stderr);
  // An executable agent, sandboxed like the tools.
  const sent = await t.ctx(["agent", "send", "maker", "go"], { cwd: ws });
  assertEquals({ code: sent.code, out: sent.stdout }, { code: 0, out: "made\n" }, sent.stderr);

  const files = ["bash-redirect", "bash-touch", "fs-write", "agent-touch", "agent-redirect"];
  const dirs = ["bash-dir", "bash-p", "bash-p/q", "agent-dir"];
  assertEquals(modes(ws, [...files, ...dirs]), {
    ...Object.fromEntries(files.map((f) => [f, "644"])),
    ...Object.fromEntries(dirs.map((d) => [d, "755"])),
  });
}

Deno.test("with cortexfsd under umask 0, tsh bash, fs.write and an executable agent create 0644 files and 0755 dirs in a host workspace", async () => {
  await withTarget(async (t) => {
    // The wrapper took: the daemon's process umask is 0 (else this test proves nothing).
    assertEquals(daemonUmask(t), "0000");
    const ws = `${t.tree.dir}/ws`;
    Deno.mkdirSync(ws);
    Deno.chmodSync(ws, 0o755);
    await check(t, ws);
  }, { wrap: UMASK0, setup: (tree) => addMaker(tree) });
});

Deno.test("with cortexfsd under umask 0, the same holds in a workspace inside the mount (<mount>/home/0/proj)", async () => {
  await withTarget(async (t) => {
    assertEquals(daemonUmask(t), "0000");
    const ws = `${t.tree.mount}/home/0/proj`;
    Deno.mkdirSync(ws);
    Deno.chmodSync(ws, 0o755);
    await check(t, ws);
    // And the backing tree holds the same modes (the mount shows what is stored).
    assertEquals(
      modes(`${t.tree.root}/home/0/proj`, ["bash-touch", "fs-write", "agent-dir"]),
      { "bash-touch": "644", "fs-write": "644", "agent-dir": "755" },
    );
  }, { wrap: UMASK0, setup: (tree) => addMaker(tree) });
});

/** The executable agent `maker` (root's, like coder), installed before the daemon starts. */
function addMaker(tree: Target["tree"]): void {
  const prog = `${tree.dir}/maker.sh`;
  Deno.writeTextFileSync(prog, MAKER, { mode: 0o755 });
  createAgent(tree.root, "maker", { uid: 0, gid: 0, exec: prog });
}
