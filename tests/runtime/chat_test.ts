/** Rule 7: `ctx agent chat` in a real terminal (tmux): line editing, history, buffered output, Ctrl+C; agent.sh. */
import { assert, assertEquals } from "../assert.ts";
import {
  addTestAgent,
  cleanup,
  ctxBin,
  history,
  makeTree,
  Raw,
  REPO,
  startRuntimeDaemon,
  Tmux,
  until,
} from "../fixture/mod.ts";

Deno.test("chat: a line is answered, history recalls it, output never corrupts a line being typed, Ctrl+C cancels then exits", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  const tm = new Tmux(`${f.dir}/tmux.sock`);
  try {
    const path = `${ctxBin(f)}:/usr/bin:/bin`;
    await tm.run(
      "new-session",
      "-d",
      "-s",
      "t",
      "-x",
      "100",
      "-y",
      "30",
      "env",
      `PATH=${path}`,
      "TERM=xterm",
      `${REPO}/cli/agent.sh`,
      "t",
    );
    await tm.wait((s) => tm.lines(s).at(-1) === "t>", "the prompt");
    await tm.run("send-keys", "-t", "t", "echo hello there", "Enter");
    await tm.wait((s) => s.includes("hello there") && tm.lines(s).at(-1) === "t>", "the answer");
    assertEquals(tm.lines(await tm.screen()), ["t> echo hello there", "hello there", "t>"]);
    // Up recalls the previous line (line editing + history); Ctrl+U clears it.
    await tm.run("send-keys", "-t", "t", "Up");
    await tm.wait((s) => tm.lines(s).at(-1) === "t> echo hello there", "history recall");
    await tm.run("send-keys", "-t", "t", "C-u");
    // A slow answer arrives while the user types: it is printed above, the typed text survives.
    await tm.run("send-keys", "-t", "t", "slow", "Enter");
    // The slow run has started (its `start` is recorded) before the user types on.
    await until(
      () => history(f, "t").events.filter((e) => e.type === "start").length === 2,
      "the slow run's start",
    );
    await tm.run("send-keys", "-t", "t", "-l", "half typed");
    // The answer, then the prompt redrawn with the typed text (two screen updates: wait for both).
    const s = await tm.wait(
      (s) => s.includes("slow answer") && tm.lines(s).at(-1) === "t> half typed",
      "the slow answer above the line being typed",
    );
    assertEquals(tm.lines(s).slice(-2), ["slow answer", "t> half typed"]);
    await tm.run("send-keys", "-t", "t", "C-u");
    // Ctrl+C while a run is active cancels it and returns to the prompt.
    await tm.run("send-keys", "-t", "t", "sleep", "Enter");
    const dir = history(f, "t").dir;
    await until(
      () => Deno.readTextFileSync(`${dir}/events.jsonl`).includes("sleeping"),
      "the sleeping delta",
    );
    await tm.run("send-keys", "-t", "t", "C-c");
    await tm.wait(
      (s) => s.includes("[cancelled]") && tm.lines(s).at(-1) === "t>",
      "the cancellation",
    );
    assertEquals(history(f, "t").events.at(-1)?.status, "cancelled");
    // Ctrl+C when idle leaves the chat (the tmux session ends with it).
    await tm.run("send-keys", "-t", "t", "C-c");
    await until(async () => (await tm.run("has-session", "-t", "t")).code !== 0, "the chat's exit");
  } finally {
    await tm.run("kill-server");
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("agent.sh resolves ctx and execs ctx agent; with input it is send --session default", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    const text = Deno.readTextFileSync(`${REPO}/cli/agent.sh`);
    assert(
      !/socket|json|nc |curl|python/i.test(text.replace(/^#.*$/gm, "")),
      "no protocol code in agent.sh",
    );
    const out = await new Deno.Command(`${REPO}/cli/agent.sh`, {
      args: ["coder", "-n", "hi", "from", "agent.sh"],
      env: { PATH: `${ctxBin(f)}:/usr/bin:/bin` },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals([out.code, new TextDecoder().decode(out.stdout)], [0, "-n hi from agent.sh\n"]);
    assertEquals(history(f, "coder", "default").messages[0].content, "-n hi from agent.sh");
    const usage = await new Deno.Command(`${REPO}/cli/agent.sh`, { stdout: "null", stderr: "null" })
      .output();
    assertEquals(usage.code, 2);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("chat: Ctrl+C while the message waits behind another run cancels it once it starts; the chat stays usable", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  const tm = new Tmux(`${f.dir}/tmux.sock`);
  const other = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    // Another client holds the session with a long run: the chat's request gets no `start` yet.
    other.write({ op: "send", id: "holder", session: "default", input: "sleep" });
    await other.until((fs) => fs.some((f) => f.type === "delta"));
    const holder = String(other.frames.find((f) => f.type === "start")?.run);
    const path = `${ctxBin(f)}:/usr/bin:/bin`;
    await tm.run(
      "new-session",
      "-d",
      "-s",
      "t",
      "-x",
      "100",
      "-y",
      "30",
      "env",
      `PATH=${path}`,
      "TERM=xterm",
      `${REPO}/cli/agent.sh`,
      "t",
    );
    await tm.wait((s) => tm.lines(s).at(-1) === "t>", "the prompt");
    // No wait is needed here: the chat handles "sleep\r" (and sends the request) before it reads
    // the ^C that follows it on the tty; the request then waits, unstarted, behind the holder.
    await tm.run("send-keys", "-t", "t", "sleep", "Enter");
    await tm.run("send-keys", "-t", "t", "C-c");
    await tm.wait((s) => s.includes("^C"), "the ^C note");
    other.write({ op: "cancel", id: holder });
    await tm.wait(
      (s) => s.includes("[cancelled]") && tm.lines(s).at(-1) === "t>",
      "the queued run's cancellation",
    );
    const starts = history(f, "t").events.filter((e) => e.type === "start");
    assertEquals(starts.length, 2);
    const mine = String(starts[1].id);
    assertEquals(
      history(f, "t").events.filter((e) => e.type === "done").map((e) => [e.run, e.status]),
      [[holder, "cancelled"], [mine, "cancelled"]],
    );
    // Still a working chat: the next line is answered.
    await tm.run("send-keys", "-t", "t", "echo still here", "Enter");
    await tm.wait((s) => tm.lines(s).includes("still here"), "the next answer");
    await tm.run("send-keys", "-t", "t", "C-c");
    await until(async () => (await tm.run("has-session", "-t", "t")).code !== 0, "the chat's exit");
  } finally {
    other.close();
    await tm.run("kill-server");
    await d.stop();
    await cleanup(f);
  }
});
