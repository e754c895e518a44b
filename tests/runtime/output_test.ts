/** What `ctx agent send|chat` show a person: the final answer, one line per tool call, approvals [y/N], colour only on terminals. */
import { assert, assertEquals } from "../assert.ts";
import {
  addTestAgent,
  cleanup,
  CONFIG,
  ctx,
  ctxBin,
  DENO,
  history,
  makeTree,
  RUNTIME_CTX,
  startRuntimeDaemon,
  Tmux,
  type Tree,
} from "../fixture/mod.ts";

const ESC = "\x1b";

Deno.test("ctx agent send prints the final assistant message after a tool call, also when the step before it streamed text", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const plain = await ctx(f, ["agent", "send", "t", "call fs.stat /workspace"]);
    const streamed = await ctx(f, ["agent", "send", "t", "look /workspace"]);
    assertEquals([plain, streamed], [
      { code: 0, stdout: "observed ok\n", stderr: "· tsh fs.stat /workspace → ok\n" },
      {
        code: 0,
        stdout: "looking at /workspace\nobserved ok\n",
        stderr: "· tsh fs.stat /workspace → ok\n",
      },
    ]);
    // What was printed is what was recorded as the run's answer.
    const last = history(f, "t").messages.at(-1);
    assertEquals(last?.content, [{ type: "text", text: "observed ok" }]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("ctx agent send shows each tool call as one status line on stderr, the whole result with --verbose", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const failed = await ctx(f, ["agent", "send", "t", "call fs.read /nope"]);
    assertEquals(failed.code, 0); // the agent observed the failure and answered
    assertEquals(failed.stdout, "observed error\n");
    assertEquals(
      failed.stderr,
      "· tsh fs.read /nope → ENOENT: /nope: No such file or directory (os error 2): stat '/nope'\n",
    );
    const verbose = await ctx(f, ["agent", "send", "t", "--verbose", "call fs.stat /workspace"]);
    const [head, body, ...rest] = verbose.stderr.split("\n");
    assertEquals([verbose.code, verbose.stdout, head, rest], [
      0,
      "observed ok\n",
      "· tsh fs.stat /workspace → ok",
      [""],
    ]);
    assertEquals(JSON.parse(body.trim()).type, "dir"); // the whole fs.stat result, indented
    assert(body.startsWith("  {"), body);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("ctx agent send without a terminal denies an approval and says how to allow it", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  try {
    const out = await ctx(f, ["agent", "send", "t", "call fs.stat /workspace"]);
    assertEquals(out.stdout, "observed error\n");
    assertEquals(
      out.stderr.split("\n")[0],
      "· approval for fs.stat denied (no terminal to ask on); rerun with --approve fs.stat",
    );
    assertEquals(out.stderr.split("\n")[1].startsWith("· tsh fs.stat /workspace → EACCES"), true);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("no colour codes when output is not a terminal, even without NO_COLOR", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const out = await new Deno.Command(DENO, {
      args: ["run", "-A", `--config=${CONFIG}`, RUNTIME_CTX, "--root", f.root]
        .concat(["agent", "send", "t", "call fs.stat /workspace"]),
      clearEnv: true,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: Deno.env.get("HOME") ?? "/" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assertEquals([out.code, text.includes(ESC), text.includes("→ ok")], [0, false, true]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

/** Starts `cmd` in a 100x30 tmux pane with a clean environment (plus `env`). */
async function inTmux(f: Tree, tm: Tmux, cmd: string[], env: Record<string, string> = {}) {
  const vars = { PATH: `${ctxBin(f)}:/usr/bin:/bin`, TERM: "xterm", HOME: "/root", ...env };
  const args = ["new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "env", "-i"];
  await tm.run(...args, ...Object.entries(vars).map(([k, v]) => `${k}=${v}`), ...cmd);
}

Deno.test("on a terminal send asks approvals inline [y/N]: y runs the call, Enter denies it; tool lines are dim unless NO_COLOR", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  // One tmux server per terminal session: nothing waits for a killed server to go away.
  const [yes, no, ctrlC] = ["yes", "no", "ctrlc"].map((n) => new Tmux(`${f.dir}/tmux-${n}.sock`));
  try {
    // The shell ignores the Ctrl+C sent to its foreground job (a trap resets in the child).
    const send = [
      "sh",
      "-c",
      "trap : INT; ctx agent send t call fs.stat /workspace; echo exit=$?; sleep 60",
    ];
    await inTmux(f, yes, send);
    const prompt = "· tsh fs.stat /workspace needs approval: allow once? [y/N]";
    await yes.wait((s) => s.includes(prompt), "the approval prompt");
    await yes.run("send-keys", "-t", "t", "y", "Enter");
    let s = await yes.wait((s) => s.includes("exit=0"), "the answer");
    assertEquals(yes.lines(s), [
      `${prompt} y`,
      "· tsh fs.stat /workspace → ok",
      "observed ok",
      "exit=0",
    ]);
    assert((await yes.screen({ escapes: true })).includes(`${ESC}[2m· tsh`), "dim tool line");

    await inTmux(f, no, send, { NO_COLOR: "1" });
    await no.wait((s) => s.includes(prompt), "the second prompt");
    await no.run("send-keys", "-t", "t", "Enter");
    s = await no.wait((s) => s.includes("exit=0"), "the denied answer");
    assertEquals(no.lines(s).slice(1, 3), [
      "· tsh fs.stat /workspace → EACCES: approval for fs.stat was not granted (fail closed)",
      "observed error",
    ]);
    assertEquals((await no.screen({ escapes: true })).includes(ESC), false);

    // Ctrl+C at the prompt cancels the run: exit 130, nothing left waiting on stdin.
    await inTmux(f, ctrlC, send);
    await ctrlC.wait((s) => s.includes(prompt), "the third prompt");
    await ctrlC.run("send-keys", "-t", "t", "C-c");
    s = await ctrlC.wait((s) => s.includes("exit="), "the cancelled send");
    assertEquals(ctrlC.lines(s), [`${prompt} ^C`, "exit=130"]);
    const results = history(f, "t").events.filter((e) => e.type === "approval_result")
      .map((e) => [e.decision, e.reason]);
    assertEquals(results, [["allow_once", "allow_once"], ["deny", "denied"], [
      "deny",
      "cancelled",
    ]]);
    assertEquals(history(f, "t").events.at(-1)?.status, "cancelled");
  } finally {
    for (const tm of [yes, no, ctrlC]) await tm.run("kill-server");
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("chat shows tool calls and asks approvals inline [y/N]", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  const tm = new Tmux(`${f.dir}/tmux.sock`);
  try {
    await inTmux(f, tm, ["ctx", "agent", "chat", "t"]);
    await tm.wait((s) => tm.lines(s).at(-1) === "t>", "the prompt");
    await tm.run("send-keys", "-t", "t", "look /workspace", "Enter");
    const prompt = "· tsh fs.stat /workspace needs approval: allow once? [y/N]";
    await tm.wait((s) => tm.lines(s).at(-1) === prompt, "the approval prompt");
    await tm.run("send-keys", "-t", "t", "y", "Enter");
    const s = await tm.wait(
      (s) => s.includes("observed ok") && tm.lines(s).at(-1) === "t>",
      "answer",
    );
    assertEquals(tm.lines(s), [
      "t> look /workspace",
      "looking at /workspace",
      `${prompt} y`,
      "· tsh fs.stat /workspace → ok",
      "observed ok",
      "t>",
    ]);
    await tm.run("send-keys", "-t", "t", "C-c");
    assertEquals(await tm.ended(), true);
  } finally {
    await tm.run("kill-server");
    await d.stop();
    await cleanup(f);
  }
});
