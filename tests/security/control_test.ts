/** Issues 8 and 24 (10): a client's cwd in the tree's control plane (`cd /ctx/agent`) is shown read-only, and a rw mount line never reaches the mount: a tool never rewrites its agent's authority. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { probe, type Target, withTarget } from "../fixture/mod.ts";

Deno.test("a cwd in <mount>/agent or <mount> is bound read-only: the tool lists it but cannot append to its own policy", async () => {
  await withTarget(async (t) => {
    const policy = `${t.tree.root}/agent/coder.d/policy`;
    const before = await Deno.readTextFile(policy);
    for (const cwd of [`${t.tree.mount}/agent`, t.tree.mount]) {
      const prefix = cwd === t.tree.mount ? "/workspace/agent" : "/workspace";
      const lines = await probe(
        t,
        [
          `ls ${prefix} | grep -qx coder.d && echo "listed: yes"`,
          `err append bash -c "echo 'allow coder_t mount:/ read' >> ${prefix}/coder.d/policy"`,
          `err create touch ${prefix}/planted`,
        ].join("\n"),
        cwd,
      );
      assertEquals(lines, [
        "listed: yes",
        "append: Read-only file system",
        "create: Read-only file system",
      ], cwd);
      await t.bystander();
    }
    assertEquals(await Deno.readTextFile(policy), before);
  });
});

/** The errno of a `tsh coder --json` call's tool result ("" when it ran without one). */
async function toolErrno(t: Target, args: string[], cwd: string): Promise<string> {
  const r = await t.ctx(["agent", "tsh", "coder", "--json", "--", ...args], { cwd });
  const frames = r.stdout.trim().split("\n").filter((l) => l.startsWith("{")).map((l) =>
    JSON.parse(l)
  );
  const msg = frames.find((f) => f.type === "message" && f.role === "tool");
  assert(msg, `no tool result: ${r.stdout} ${r.stderr}`);
  return msg.content[0].errno ?? "";
}

Deno.test("a rw mount line whose source reaches the mount (a symlink to <mount>/agent, <mount>/agent itself) is refused EACCES: no writable view of the agent's controls", async () => {
  await withTarget(async (t) => {
    const d = `${t.tree.root}/agent/coder.d`;
    const policy = await Deno.readTextFile(`${d}/policy`);
    const ws = `${t.tree.dir}/ws`;
    await Deno.mkdir(ws);
    const link = `${t.tree.dir}/ctl-link`;
    await Deno.symlink(`${t.tree.mount}/agent`, link);
    const seen: Record<string, string> = {};
    for (const src of [link, `${t.tree.mount}/agent`]) {
      replaceFile(`${d}/mount`, `${src}\t/ctl\trw\t-\n`);
      const [errno] = await Promise.all([
        toolErrno(t, ["bash", "echo 'allow coder_t mount:/ read' >> /ctl/coder.d/policy"], ws),
        t.bystander(),
      ]);
      seen[src === link ? "symlink" : "mount"] = errno;
    }
    assertEquals({ seen, policy: await Deno.readTextFile(`${d}/policy`) }, {
      seen: { symlink: "EACCES", mount: "EACCES" },
      policy,
    });
    // The same line read-only binds: the refusal is the mode, not the source.
    replaceFile(`${d}/mount`, `${link}\t/ctl\tro\t-\n`);
    assertEquals(await toolErrno(t, ["bash", "test -f /ctl/coder.d/policy"], ws), "");
    await t.bystander();
  }, {
    setup(tree) {
      const p = `${tree.root}/agent/coder.d/policy`;
      replaceFile(
        p,
        Deno.readTextFileSync(p) +
          "allow coder_t mount:/ctl read\nallow coder_t mount:/ctl write\n",
      );
    },
  });
});
