/** `ctx agent new`: every option, and invalid input rejected before anything is written. */
import { assertEquals, assertMatch } from "../assert.ts";
import { ctxRun } from "../fixture/mod.ts";
import { names, snapshot } from "../store/snapshot.ts";
import { loadAgent } from "../../src/store/agent.ts";
import { treeProblems } from "../../src/store/validate.ts";
import { BUILTIN_TOOLS } from "../../src/abi/builtin.ts";

async function withTree(fn: (root: string) => Promise<void>): Promise<void> {
  const storage = await Deno.makeTempDir({ prefix: "ctx-agent-" });
  try {
    const made = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: storage } });
    assertEquals([made.code, made.stderr], [0, ""]);
    await fn(`${storage}/current`);
  } finally {
    await Deno.remove(storage, { recursive: true });
  }
}

const at = (root: string) => ({ env: { CTX_ROOT: root } });
const uid = Deno.uid() ?? 0;

Deno.test("ctx agent new makes a model-backed agent with defaults, entry last, tree still valid", async () => {
  await withTree(async (root) => {
    assertEquals(await ctxRun(["agent", "new", "helper"], at(root)), {
      code: 0,
      stdout: "agent/helper\n",
      stderr: "",
    });
    assertEquals(
      Deno.readTextFileSync(`${root}/agent/helper`),
      "#!/usr/bin/cortexfs-object-runner\nkind=agent\nname=helper\n",
    );
    const a = loadAgent(root, "helper");
    assertEquals(
      {
        owner: a.owner,
        label: a.label.type,
        model: a.model,
        window: a.window,
        perm: a.perm,
        abi: a.abi,
        policy: a.policy.map((r) => `${r.subject} ${r.class}:${r.object} ${r.permission}`),
      },
      {
        owner: uid,
        label: "agent_t",
        model: "debug/echo",
        window: "auto",
        perm: { r: true, w: true, x: true },
        abi: "sdk-envelope-v1",
        policy: [
          ...BUILTIN_TOOLS.map((t) => `agent_t tool:${t.name} execute`),
          "agent_t model:debug/echo use",
        ],
      },
    );
    assertEquals(names(`${root}/home/${uid}/agent`), ["coder", "helper"]);
    assertEquals(treeProblems(root), []);
  });
});

Deno.test("ctx agent new honours --model, --perm, --window and --exec", async () => {
  await withTree(async (root) => {
    const prog = await Deno.makeTempFile({ prefix: "ctx-agent-prog-" });
    try {
      Deno.writeTextFileSync(prog, "#!/bin/sh\necho '{}'\n");
      const r = await ctxRun(
        [
          "agent",
          "new",
          "runner",
          "--model",
          "main",
          "--perm",
          "r-x",
          "--window",
          "4096",
          "--exec",
          prog,
        ],
        at(root),
      );
      assertEquals(r, { code: 0, stdout: "agent/runner\n", stderr: "" });
      assertEquals(Deno.readTextFileSync(`${root}/agent/runner`), "#!/bin/sh\necho '{}'\n");
      assertEquals((Deno.statSync(`${root}/agent/runner`).mode ?? 0) & 0o777, 0o755);
      const d = `${root}/agent/runner.d`;
      assertEquals(
        ["model", "perm", "window", "abi"].map((c) => Deno.readTextFileSync(`${d}/${c}`)),
        ["main\n", "r-x\n", "4096\n", "sdk-envelope-v1\n"],
      );
      assertMatch(Deno.readTextFileSync(`${d}/policy`), /^allow agent_t model:debug\/echo use$/m);
      assertEquals(treeProblems(root), []);
    } finally {
      Deno.removeSync(prog);
    }
  });
});

Deno.test("ctx agent new rejects bad input before writing anything", async () => {
  await withTree(async (root) => {
    const before = snapshot(root);
    const cases: [string[], number, string, RegExp][] = [
      [["bad name"], 2, "EINVAL: agent/bad name", /whitespace/],
      [["x.d"], 2, "EINVAL: agent/x.d", /\.d/],
      [["coder"], 1, "EEXIST: agent/coder", /already exists/],
      [["a1", "--perm", "rwxr"], 2, "EINVAL: agent/a1.d/perm", /"rwxr"/],
      [["a1", "--window", "0"], 2, "EINVAL: agent/a1.d/window", /"0"/],
      [["a1", "--window", "01"], 2, "EINVAL: agent/a1.d/window", /leading zero/],
      [["a1", "--window", "131073"], 2, "EINVAL: agent/a1.d/window", /limit 131072/],
      [["a1", "--model", "nope/none"], 1, "ENOENT: agent/a1.d/model", /nope\/none/],
      [["a1", "--model", "a/b/c"], 2, "EINVAL: agent/a1.d/model", /two components/],
      [["a1", "--exec", "/nonexistent/prog"], 1, "ENOENT: /nonexistent/prog", /./],
      [["a1", "--exec", "/tmp"], 2, "EINVAL: /tmp", /regular file/],
    ];
    for (const [args, code, head, rule] of cases) {
      const r = await ctxRun(["agent", "new", ...args], at(root));
      const label = `${args.join(" ")}: ${r.stderr}`;
      assertEquals([r.code, r.stdout], [code, ""], label);
      assertEquals(r.stderr.startsWith(`ctx: ${head}: `), true, label);
      assertMatch(r.stderr, rule, label);
      assertEquals(snapshot(root), before, label);
    }
  });
});

Deno.test("ctx agent new refuses a half-created agent's leftover control directory", async () => {
  await withTree(async (root) => {
    Deno.mkdirSync(`${root}/agent/ghost.d`);
    assertEquals(treeProblems(root), []); // a .d without its entry is not an object yet
    const r = await ctxRun(["agent", "new", "ghost"], at(root));
    assertEquals(r, {
      code: 1,
      stdout: "",
      stderr: "ctx: EEXIST: agent/ghost.d: agent/ghost.d exists without agent/ghost: an " +
        "interrupted creation; remove agent/ghost.d to retry\n",
    });
  });
});
