/** ctxterm as a person uses it, through tmux: attach and type, watch the same screen, detach and come back, resize, exit, kill -9. */
import { assert, assertEquals } from "../assert.ts";
import {
  closePane,
  CTXTERM_ARGV,
  events,
  pane,
  startTerm,
  stopTerm,
  type Term,
  type Tmux,
  until,
} from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

const attach = (t: Term) => [...CTXTERM_ARGV, "attach", t.socket];
const watch = (t: Term) => [...CTXTERM_ARGV, "watch", t.socket];

/** The screen's lines that hold text, trailing blanks trimmed. */
const text = (tm: Tmux, s: string) => tm.lines(s);

Deno.test("attach: typing `echo hi` shows hi; a watcher sees the same screen and its keys change nothing", async () => {
  const t = await startTerm();
  const a = await pane(t.dir, "a", attach(t));
  const w = await pane(t.dir, "w", watch(t));
  try {
    await a.wait((s) => /^\$/m.test(s), "the prompt in the attacher");
    await a.run("send-keys", "-t", "t", "echo hi", "Enter");
    const sa = await a.wait(
      (s) => /^hi$/m.test(s) && s.trimEnd().endsWith("$"),
      "hi and a new prompt",
    );
    const sw = await w.wait(
      (s) => /^hi$/m.test(s) && s.trimEnd().endsWith("$"),
      "hi in the watcher",
    );
    assertEquals(text(w, sw), text(a, sa));
    // The watcher types a command: the server drops it, nothing reaches the shell.
    await w.run("send-keys", "-t", "t", "echo WATCHER-TYPED", "Enter");
    await a.run("send-keys", "-t", "t", "echo after", "Enter");
    const after = await a.wait((s) => /^after$/m.test(s), "the attacher's next command");
    assert(!after.includes("WATCHER-TYPED"), after);
    const sw2 = await w.wait((s) => /^after$/m.test(s), "the watcher sees the attacher's command");
    assert(!sw2.includes("WATCHER-TYPED"), sw2);
    assert(!atobAll(t).includes("WATCHER-TYPED"));
  } finally {
    await closePane(a);
    await closePane(w);
    await stopTerm(t);
  }
});

function atobAll(t: Term): string {
  return events(t).events.filter((e) => e.type === "pty.output").map((e) =>
    atob((e as { data_b64: string }).data_b64)
  ).join("");
}

Deno.test("detach and re-attach shows the current screen, vi's alternate screen included", async () => {
  const t = await startTerm();
  const file = `${t.dir}/notes.txt`;
  const a = await pane(t.dir, "a", attach(t));
  let b: Tmux | undefined;
  try {
    await a.wait((s) => /^\$/m.test(s), "the prompt");
    await a.run("send-keys", "-t", "t", `vi -u NONE ${file}`, "Enter");
    await a.wait((s) => /^~/m.test(s), "vi's empty buffer");
    await a.run("send-keys", "-t", "t", "ihello from vi", "Escape");
    await a.wait((s) => s.startsWith("hello from vi"), "the typed text");
    await a.run("send-keys", "-t", "t", "C-]");
    const gone = await a.wait((s) => s.includes("[client exit 0]"), "the client to detach");
    assert(!gone.includes("hello from vi"), "detaching leaves the alternate screen");
    // A new client sees vi's screen at once, before any new output.
    b = await pane(t.dir, "b", attach(t));
    const s = await b.wait(
      (s) => s.startsWith("hello from vi") && /^~/m.test(s),
      "vi on re-attach",
    );
    assertEquals(text(b, s)[0], "hello from vi");
    await b.run("send-keys", "-t", "t", "Escape", ":wq", "Enter");
    await b.wait((s) => /^\$/m.test(s) && !/^~/m.test(s), "back at the shell");
    assertEquals(Deno.readTextFileSync(file), "hello from vi\n");
  } finally {
    await closePane(a);
    if (b) await closePane(b);
    await stopTerm(t);
  }
});

Deno.test("a resize of the attacher's window reaches the program (stty size)", async () => {
  const t = await startTerm();
  const a = await pane(t.dir, "a", attach(t), { cols: 100, rows: 30 });
  try {
    await a.wait((s) => /^\$/m.test(s), "the prompt");
    // The first attacher's size replaces the initial 24x80.
    await a.run("send-keys", "-t", "t", "stty size", "Enter");
    await a.wait((s) => /^30 100$/m.test(s), "30 100");
    await a.run("resize-window", "-t", "t", "-x", "120", "-y", "40");
    await a.run("send-keys", "-t", "t", "clear; stty size", "Enter");
    await a.wait((s) => /^40 120$/m.test(s), "40 120 after the resize");
    const sizes = events(t).events.filter((e) => e.type === "pty.resize").map((
      e,
    ) => [(e as { rows: number }).rows, (e as { cols: number }).cols]);
    assertEquals(sizes, [[30, 100], [40, 120]]);
  } finally {
    await closePane(a);
    await stopTerm(t);
  }
});

Deno.test("the program's exit is recorded and ends the terminal; clients hear it", async () => {
  const t = await startTerm();
  const a = await pane(t.dir, "a", attach(t));
  try {
    await a.wait((s) => /^\$/m.test(s), "the prompt");
    await a.run("send-keys", "-t", "t", "exit 3", "Enter");
    await a.wait((s) => s.includes("[client exit 3]"), "the client to end with the program's code");
    assertEquals((await t.status).code, 3);
    const ev = events(t);
    assertEquals(ev.torn, false);
    const last = ev.events.at(-1);
    assertEquals(last?.type, "process.exit");
    assertEquals((last as { exit_code: number }).exit_code, 3);
    assertEquals(Deno.readTextFileSync(`${t.record}/state`), "exited\n");
    assertEquals(JSON.parse(Deno.readTextFileSync(`${t.record}/meta.json`)).exit_code, 3);
    assert(
      ev.events.some((e) => e.type === "client.detach" && e.reason === "exit"),
      "the attacher's detach is recorded",
    );
    assertEquals(
      (() => {
        try {
          Deno.lstatSync(t.socket);
          return "present";
        } catch (e) {
          ignore(e, Deno.errors.NotFound);
          return "removed";
        }
      })(),
      "removed",
    );
  } finally {
    await closePane(a);
    await stopTerm(t);
  }
});

Deno.test("kill -9 of ctxterm mid-output leaves events.jsonl whole lines and parseable", async () => {
  const t = await startTerm(["/bin/sh", "-c", "while :; do seq 1 2000; done"]);
  try {
    await until(
      () => events(t).events.filter((e) => e.type === "pty.output").length > 20,
      "output",
    );
    Deno.kill(t.pid, "SIGKILL");
    const st = await t.status;
    assertEquals(st.signal, "SIGKILL");
    const ev = events(t); // throws if any whole line is not a valid event in seq order
    assert(ev.events.length > 20);
    const seqs = ev.events.map((e) => e.seq);
    assertEquals(seqs, [...seqs].sort((x, y) => x - y));
    assertEquals(Deno.readTextFileSync(`${t.record}/state`), "running\n");
    // The program died with it (its session lost the PTY): nothing is left writing.
    await until(() => {
      try {
        Deno.kill(t.program, "SIGCONT");
        return false;
      } catch (e) {
        ignore(e, Deno.errors.NotFound);
        return true;
      }
    }, "the program to be gone");
  } finally {
    await stopTerm(t);
  }
});

Deno.test("SIGTERM to ctxterm stops the program and records process.exit with the reason", async () => {
  const t = await startTerm();
  const w = await pane(t.dir, "w", watch(t));
  try {
    await w.wait((s) => /^\$/m.test(s), "the prompt");
    Deno.kill(t.pid, "SIGTERM");
    const st = await t.status;
    assertEquals(st.code, 129); // bash ended by SIGHUP: 128 + 1
    const last = events(t).events.at(-1) as { type: string; reason?: string; signal: number };
    assertEquals([last.type, last.reason, last.signal], ["process.exit", "sigterm", 1]);
    await w.wait((s) => s.includes("[client exit 129]"), "the watcher ends with the code");
  } finally {
    await closePane(w);
    await stopTerm(t);
  }
});
