/** Rule 4: executable agents under sdk-envelope-v1: envelope, environment, output rules, limits. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  addTestAgent,
  AGENT_SH,
  cleanup,
  ctx,
  DAEMON_SECRETS,
  history,
  makeTree,
  Raw,
  shape,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

function logs(f: Tree, run: string, step: number) {
  const base = `${f.logs}/${run}.${step}`;
  const env = Object.fromEntries(
    Deno.readTextFileSync(`${base}.env`).split("\0").filter(Boolean).map((kv) => {
      const i = kv.indexOf("=");
      return [kv.slice(0, i), kv.slice(i + 1)];
    }),
  );
  return {
    stdin: Deno.readTextFileSync(`${base}.stdin`),
    rest: Deno.readTextFileSync(`${base}.rest`),
    env,
  };
}

async function send(f: Tree, agent: string, input: string, id = crypto.randomUUID()) {
  const c = await Raw.connect(`${f.root}/agent/${agent}.sock`);
  try {
    c.write({ op: "send", id, session: "default", input });
    return await c.run();
  } finally {
    c.close();
  }
}

Deno.test("ctx agent new --exec installs a sdk-envelope-v1 agent; without --exec it is model-backed", async () => {
  const f = await makeTree();
  try {
    const prog = AGENT_SH;
    const made = await ctx(f, ["agent", "new", "prog", "--exec", prog]);
    assertEquals(made.code, 0, made.stderr);
    assertEquals(Deno.readTextFileSync(`${f.root}/agent/prog.d/abi`), "sdk-envelope-v1\n");
    assertEquals(Deno.readFileSync(`${f.root}/agent/prog`), Deno.readFileSync(prog));
    assertEquals((await ctx(f, ["agent", "new", "plain"])).code, 0);
    const d = await startRuntimeDaemon(f);
    try {
      const plain = await ctx(f, ["agent", "send", "plain", "model", "backed"]);
      assertEquals(plain, { code: 0, stdout: "model backed\n", stderr: "" });
    } finally {
      await d.stop();
    }
  } finally {
    await cleanup(f);
  }
});

Deno.test("the envelope's tool_context carries the tools tsh load/pin put in the agent's context", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const pin = await ctx(f, ["agent", "tsh", "t", "pin", "fs.read"]);
    assertEquals(pin.code, 0, pin.stderr);
    const frames = await send(f, "t", "echo ok");
    const context = JSON.parse(logs(f, String(frames[0].run), 0).stdin).tool_context as string;
    assertMatch(context, /^Loaded tools [^\n]*\n- fs\.read \(pinned\): \S/);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("step 0 gets exactly one envelope line and a cleared environment: the sandbox allowlist, .d/env, CTX_*", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const frames = await send(f, "t", "echo one two");
    const run = String(frames[0].run);
    assert(/^ctx-[0-9a-f]{32}$/.test(run), run);
    const got = logs(f, run, 0);
    assertEquals(got.rest, "");
    assertEquals(JSON.parse(got.stdin), {
      schema: "cortexfs.agent-invocation/v1",
      run,
      step: 0,
      input: "echo one two",
      history_messages: "[]",
      tool_context: "",
      observation: null,
    });
    assertEquals(Object.keys(JSON.parse(got.stdin)), [
      "schema",
      "run",
      "step",
      "input",
      "history_messages",
      "tool_context",
      "observation",
    ]);
    assertEquals(got.env, {
      // The sandbox's allowlist (seed "Sandbox Contract"), as for every tool.
      CTX_ROOT: "/ctx",
      CTX_HOME: "/ctx/home/0",
      CTX_AGENT_SUBJECT: "agent_t",
      CTX_PATH: "/ctx/tool:/ctx/home/0/tool",
      HOME: "/home/agent",
      USER: "agent",
      LOGNAME: "agent",
      SHELL: "/bin/bash",
      TERM: "xterm-256color",
      LANG: "C.UTF-8",
      PATH: "/usr/bin:/bin",
      PWD: "/workspace", // bwrap's --chdir sets it
      LOG_DIR: f.logs,
      AGENT_FLAVOR: "test",
      CTX_AGENT: "t",
      CTX_SESSION: "default",
      CTX_RUN_ID: run,
      CTX_AGENT_STEP: "0",
      CTX_AGENT_STEPS: "9",
      CTX_CONTEXT_WINDOW_TOKENS: "131072",
      CTX_CONTEXT_WINDOW_CHARS: "524288",
    });
    for (const [k, v] of Object.entries(DAEMON_SECRETS)) {
      assert(!(k in got.env) && !Object.values(got.env).includes(v), `${k} leaked`);
    }
    assertEquals(shape(frames), [
      {
        type: "start",
        run: "<run>",
        id: "<id>",
        client_id: "<client_id>",
        op: "send",
        session: "default",
        scope: "private",
        cwd: "/workspace",
        digest: "<digest>",
        ts: "<ts>",
      },
      { type: "delta", run: "<run>", text: "one " },
      { type: "delta", run: "<run>", text: "two " },
      {
        type: "message",
        run: "<run>",
        role: "assistant",
        content: [{ type: "text", text: "echo: one two" }],
      },
      { type: "done", run: "<run>", status: "ok", ts: "<ts>" },
    ]);
    // The second run sees the first in history_messages.
    const again = await send(f, "t", "echo three");
    const h = JSON.parse(JSON.parse(logs(f, String(again[0].run), 0).stdin).history_messages);
    assertEquals(h, [{ role: "user", content: "echo one two" }, {
      role: "assistant",
      content: "echo: one two",
    }]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("a yielded tool_call runs through the tool path; step 1 gets exactly that host result", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const frames = await send(f, "t", "call fs.stat /workspace");
    const run = String(frames[0].run);
    const types = frames.map((x) => x.type);
    assertEquals(types, ["start", "tool_call", "message", "message", "done"]);
    const result = (frames[2].content as Record<string, unknown>[])[0];
    const step1 = JSON.parse(logs(f, run, 1).stdin);
    assertEquals(step1.step, 1);
    assertEquals(step1.observation, {
      tool_call_id: "call-1",
      name: "tsh",
      status: result.status,
      content: result.content,
      truncated: result.truncated,
    });
    assertEquals(logs(f, run, 1).env.CTX_AGENT_STEP, "1");
    assertEquals(frames[3].content, [{ type: "text", text: `observed ${result.status}` }]);
    assertEquals(frames.at(-1)?.status, "ok");
    // messages.jsonl: the user message once, the tool result once, one assistant outcome.
    const m = history(f, "t").messages.map((x) => x.role);
    assertEquals(m, ["user", "tool", "assistant"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("invalid agent output fails the run with a host error frame", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const cases: [string, string, string][] = [
      ["start", "EPROTO", 'invalid agent output: agents may not emit "start" frames'],
      ["done", "EPROTO", 'invalid agent output: agents may not emit "done" frames'],
      ["result", "EPROTO", 'invalid agent output: agents may not emit "tool_result" frames'],
      ["approve", "EPROTO", 'invalid agent output: agents may not emit "approval_result" frames'],
      ["two", "EPROTO", "invalid agent output: a frame after the yielded tool_call"],
      ["after", "EPROTO", "invalid agent output: a frame after the yielded tool_call"],
      ["garbage", "EPROTO", "invalid agent output: stdout line is not JSON"],
      ["error", "ENOENT", "agent says no"],
      ["fail oops", "EIO", "agent process failed (exit 3): agent trouble: oops"],
    ];
    for (const [input, code, message] of cases) {
      const frames = await send(f, "t", input);
      const tail = frames.slice(-2).map((x) => ({
        type: x.type,
        code: x.code,
        message: x.message,
        status: x.status,
      }));
      assertEquals(tail, [
        { type: "error", code, message, status: undefined },
        { type: "done", code: undefined, message: undefined, status: "error" },
      ], input);
      assert(!frames.some((x) => x.type === "tool_call"), `${input}: no call may run`);
    }
    // The failed step's stderr went to the agent's log too: stamped, owner-only (0600).
    const log = `${f.root}/agent/t.d/log`;
    assertMatch(Deno.readTextFileSync(log), /Z ctx-[0-9a-f]{32} step 0: agent trouble: oops\n/);
    assertEquals((Deno.statSync(log).mode ?? 0) & 0o777, 0o600);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("at most 8 calls and 9 process starts; a replayed call id is refused before authorization", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const frames = await send(f, "t", "calls");
    const run = String(frames[0].run);
    assertEquals(frames.filter((x) => x.type === "tool_call").length, 8);
    assertEquals(frames.slice(-2).map((x) => [x.type, x.code ?? x.status]), [["error", "E2BIG"], [
      "done",
      "error",
    ]]);
    const starts = [...Deno.readDirSync(f.logs)].filter((e) =>
      e.name.startsWith(run) && e.name.endsWith(".stdin")
    );
    assertEquals(starts.length, 9);

    const replay = await send(f, "t", "replay");
    assertEquals(replay.filter((x) => x.type === "tool_call").length, 1);
    assertEquals(replay.slice(-2).map((x) => [x.type, x.code ?? x.status]), [["error", "EINVAL"], [
      "done",
      "error",
    ]]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("a run never inherits authority: policy is re-read for every call", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const errnoOf = (frames: Record<string, unknown>[]) => {
      const tool = frames.find((x) => x.type === "message" && x.role === "tool")!;
      return (tool.content as Record<string, unknown>[])[0].errno ?? null;
    };
    assertEquals(errnoOf(await send(f, "t", "call fs.stat /workspace")), null);
    const policy = `${f.root}/agent/t.d/policy`;
    const text = Deno.readTextFileSync(policy);
    Deno.writeTextFileSync(
      policy,
      text.split("\n").filter((l) => !l.includes("tool:fs.stat")).join("\n"),
    );
    assertEquals(errnoOf(await send(f, "t", "call fs.stat /workspace")), "EACCES");
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
