/** Issue 24 item 5: `ctx agent send`'s approval prompt, on a real terminal, shows exactly the call that would run. */
import { assertEquals } from "../assert.ts";
import {
  addTestAgent,
  cleanup,
  closePane,
  CONFIG,
  DENO,
  makeTree,
  pane,
  RUNTIME_CTX,
  startRuntimeDaemon,
  type Tmux,
  until,
} from "../fixture/mod.ts";

Deno.test("item 5: the approval prompt shows a long call whole and its control characters escaped", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  const ws = await Deno.makeTempDir({ prefix: "ctx-ws-" });
  let tm: Tmux | undefined;
  try {
    // The test agent turns `call W...` into one tsh call of the words W (JSON escapes decoded):
    // a path past 120 characters, then a word whose `\r` + erase-line would hide what came before.
    const long = `/workspace/${"a".repeat(130)}`;
    const input = `call fs.write ${long} pwn\r\u001b[2Kok`;
    const argv = [DENO, "run", "-A", `--config=${CONFIG}`, RUNTIME_CTX, "--root", f.root];
    tm = await pane(
      f.dir,
      "send",
      ["/usr/bin/env", "-C", ws, ...argv, "agent", "send", "t", input],
      {
        cols: 100,
        rows: 20,
      },
    );
    const joined = async () => (await tm!.run("capture-pane", "-p", "-J", "-t", "t")).out;
    let screen = "";
    await until(async () => (screen = await joined()).includes("[y/N]"), "the approval prompt");
    const prompt = screen.split("\n").find((l) => l.includes("needs approval")) ?? "";
    // Whole and visible: the long path, then the hidden word with its escapes shown.
    assertEquals(
      prompt.trimEnd(),
      `· tsh fs.write ${long} 'pwn\\r\\x1b[2Kok' needs approval: allow once? [y/N]`,
      screen,
    );
    await tm.run("send-keys", "-t", "t", "n", "Enter");
    await until(async () => (await joined()).includes("[client exit"), "ctx to end");
    // Only the empty .git the sandbox guards make at a writable workspace root (spec/sandbox.md).
    assertEquals([...Deno.readDirSync(ws)].map((e) => e.name), [".git"], "nothing was written");
    assertEquals([...Deno.readDirSync(`${ws}/.git`)], []);
  } finally {
    if (tm) await closePane(tm);
    await d.stop();
    await cleanup(f);
    await Deno.remove(ws, { recursive: true }).catch(() => {});
  }
});
