/** Issue 8: a client's cwd in the tree's control plane (`cd /ctx/agent`) is shown read-only: a tool never rewrites its agent's authority. */
import { assertEquals } from "../assert.ts";
import { probe, withTarget } from "../fixture/mod.ts";

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
