/** The initial tree (tree_version 1): exact shape, modes, and every control valid per src/abi. */
import { assertEquals } from "../assert.ts";
import { names } from "./snapshot.ts";
import { buildInitialTree, DEFAULT_TEMPLATE, ROOT_ENTRIES } from "../../src/store/tree.ts";
import { treeProblems } from "../../src/store/validate.ts";
import { loadAgent, loadModel, loadTool } from "../../src/store/agent.ts";
import { BUILTIN_TOOLS, toolEntry } from "../../src/abi/builtin.ts";

const CTX = { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0, now: 1700000000 };

async function withTree(fn: (dir: string) => void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ctx-tree-" });
  try {
    buildInitialTree(dir, CTX);
    fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const mode = (p: string) => (Deno.lstatSync(p).mode ?? 0) & 0o7777;

Deno.test("initial tree: the frozen root and nothing else, valid by every control parser", async () => {
  await withTree((dir) => {
    assertEquals(names(dir), [...ROOT_ENTRIES].sort());
    assertEquals(treeProblems(dir), []);
    assertEquals(names(`${dir}/shared`), []);
    assertEquals(names(`${dir}/bin`), []); // the update writes the bootstrap file last
    assertEquals(Deno.readTextFileSync(`${dir}/status`), "state=offline\n");
  });
});

Deno.test("initial tree: debug/echo with metadata, controls, a known limit and the main alias", async () => {
  await withTree((dir) => {
    assertEquals(names(`${dir}/model`), ["debug", "main"]);
    assertEquals(Deno.readLinkSync(`${dir}/model/main`), "debug/echo");
    assertEquals(names(`${dir}/model/debug`), ["echo", "echo.d"]);
    assertEquals(mode(`${dir}/model/debug/echo`), 0o555);
    assertEquals(
      Deno.readTextFileSync(`${dir}/model/debug/echo`),
      "#!/usr/bin/cortexfs-object-runner\nid=debug/echo\nname=echo\n" +
        "description=Built-in test model: answers with its input.\ntype=model\n" +
        "created_at=1700000000\nowned_by=cortexfs\ncontext_length=131072\n",
    );
    const m = loadModel(dir, "main");
    assertEquals(
      { ...m, dir: "" },
      {
        ref: "debug/echo",
        provider: "debug",
        model: "echo",
        id: "echo",
        dir: "",
        limit: 131072,
        driver: m.driver,
        cap: ["chat", "stream"],
        fallback: [],
        session: "none",
        effort: "auto",
      },
    );
    assertEquals(names(`${dir}/model/debug/echo.d`), [
      "cap",
      "driver",
      "effort",
      "fallback",
      "limit",
      "session",
    ]);
  });
});

Deno.test("initial tree: the six built-in tools with entries 0755 and complete controls", async () => {
  await withTree((dir) => {
    assertEquals(
      names(`${dir}/tool`),
      BUILTIN_TOOLS.flatMap((t) => [t.name, `${t.name}.d`]).sort(),
    );
    for (const t of BUILTIN_TOOLS) {
      assertEquals(mode(`${dir}/tool/${t.name}`), 0o755);
      assertEquals(Deno.readTextFileSync(`${dir}/tool/${t.name}`), toolEntry(t));
      assertEquals(names(`${dir}/tool/${t.name}.d`), [
        "cap",
        "description",
        "log",
        "name",
        "policy",
        "schema",
        "status",
      ]);
      const def = loadTool(`${dir}/tool`, t.name);
      assertEquals(
        { name: def.name, description: def.description, schema: def.schema, cap: def.cap },
        { name: t.name, description: `${t.description}\n`, schema: t.schema, cap: t.cap },
      );
      assertEquals(
        def.policy.map((r) => `${r.subject} ${r.class}:${r.object} ${r.permission}`),
        [`coder_t tool:${t.name} execute`, `agent_t tool:${t.name} execute`],
      );
    }
  });
});

Deno.test("initial tree: agent coder owned by the creating uid, granted its tools and model", async () => {
  await withTree((dir) => {
    assertEquals(names(`${dir}/agent`), ["coder", "coder.d"]);
    assertEquals(
      Deno.readTextFileSync(`${dir}/agent/coder`),
      "#!/usr/bin/cortexfs-object-runner\nkind=agent\nname=coder\n",
    );
    const a = loadAgent(dir, "coder");
    assertEquals({ ...a, dir: "" }, {
      name: "coder",
      dir: "",
      owner: CTX.uid,
      uid: CTX.uid,
      gid: CTX.gid,
      groups: [],
      label: { user: "user_u", role: "agent_r", type: "coder_t", level: "s0" },
      subject: "coder_t",
      root: undefined,
      cwd: "/workspace",
      env: {},
      path: ["/ctx/tool", `/ctx/home/${CTX.uid}/tool`],
      mount: [],
      model: "debug/echo",
      window: "auto",
      perm: { r: true, w: true, x: true },
      abi: "sdk-envelope-v1",
      approval: "auto",
      rlimit: {},
      tools: [],
      policy: [
        ...BUILTIN_TOOLS.map((t) => ({
          subject: "coder_t",
          class: "tool" as const,
          object: t.name,
          permission: "execute",
        })),
        { subject: "coder_t", class: "model" as const, object: "debug/echo", permission: "use" },
      ],
      system: "You are coder, an agent of CortexFS working in /workspace.\n",
      template: DEFAULT_TEMPLATE,
      meta: { name: "coder" },
    });
    assertEquals(names(`${dir}/home`), [String(CTX.uid)]);
    assertEquals(names(`${dir}/home/${CTX.uid}`), ["agent", "model", "tool"]);
    assertEquals(names(`${dir}/home/${CTX.uid}/agent/coder`), ["session"]);
    assertEquals(mode(`${dir}/home/${CTX.uid}/agent/coder`), 0o700);
  });
});
