/** The product as a user meets it: one cortexfsd serves /ctx and the agent sockets; ctx talks to both. */
import { assertEquals } from "../assert.ts";
import { cleanup, CTX, type Daemon, DENO, makeTree, sh, startDaemon } from "../fixture/mod.ts";
import { mountedType } from "../../src/fuse/mount.ts";

Deno.test("cortexfsd serves /ctx and agent sockets together: send, tsh, history through the mount", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const ctx = (args: string) =>
      sh(`CTX_ROOT='${tree.mount}' '${DENO}' run -A --quiet '${CTX}' ${args}`, { cwd: tree.dir });
    // The socket alias is visible through the mount and leads to the live socket.
    const link = await sh(`readlink '${tree.mount}/agent/coder.sock'`);
    assertEquals(link.stdout.trim(), `${tree.run}/agent/coder.sock`);

    const sent = await ctx("agent send coder 'hello through the mount'");
    assertEquals({ code: sent.code, out: sent.stdout, err: sent.stderr }, {
      code: 0,
      out: "hello through the mount\n",
      err: "",
    });
    // The session is ordinary JSONL, readable through the mount with plain tools.
    const session = `${tree.mount}/home/0/agent/coder/session/default`;
    const msgs = (await sh(`cat '${session}/messages.jsonl'`)).stdout.trim().split("\n")
      .map((l) => JSON.parse(l));
    assertEquals(
      msgs.map((m) => [m.role, typeof m.content === "string" ? m.content : m.content[0].text]),
      [
        ["user", "hello through the mount"],
        ["assistant", "hello through the mount"],
      ],
    );
    assertEquals(
      (await sh(`stat -c %a '${session}' '${session}/events.jsonl'`)).stdout,
      "700\n600\n",
    );

    // tsh through the socket: the built-ins, no model call; exit status is the tool's.
    const tools = await ctx("agent tsh coder -- tools");
    assertEquals({ code: tools.code, out: tools.stdout }, {
      code: 0,
      out: "bash\nfs.list\nfs.read\nfs.replace\nfs.stat\nfs.write\n",
    });
    const missing = await ctx("agent tsh coder -- ls");
    assertEquals(missing.code !== 0, true);

    const hist = await ctx("agent history coder --json");
    assertEquals(hist.code, 0);
    const runs: { op: string; status: string; tool_calls: number }[] = JSON.parse(hist.stdout);
    assertEquals(runs.map((r) => [r.op, r.status]), [["send", "ok"], ["tsh", "ok"], [
      "tsh",
      "error",
    ]]);

    // SIGTERM closes the sockets, unmounts, exits 0.
    const code = await d.stop();
    d = null;
    assertEquals({ code, mounted: mountedType(tree.mount) }, { code: 0, mounted: null });
  } finally {
    await cleanup(tree, d);
  }
});
