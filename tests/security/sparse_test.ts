/** Issue 24, item 6: a huge (sparse) history file is refused with EFBIG, never read whole; the daemon serves on. */
import { assert, assertEquals } from "../assert.ts";
import { withTarget } from "../fixture/mod.ts";

/** root's default session of `coder`, tree-relative. */
const SESSION = "home/0/agent/coder/session/default";

Deno.test("a 2 GiB sparse events.jsonl and messages.jsonl: send and history answer EFBIG, another session and the mount still serve", async () => {
  await withTarget(async (t) => {
    const first = await t.ctx(["agent", "send", "coder", "hi"]);
    assertEquals(first.code, 0, first.stderr);
    // Holes up to 2 GiB, then a newline: a well-formed end, so only the size can refuse it.
    for (const f of ["events.jsonl", "messages.jsonl"]) {
      const file = await Deno.open(`${t.tree.root}/${SESSION}/${f}`, { write: true });
      try {
        await file.truncate(2 ** 31);
        await file.seek(0, Deno.SeekMode.End);
        await file.write(new TextEncoder().encode("\n"));
      } finally {
        file.close();
      }
    }
    const [send, history] = await Promise.all([
      t.ctx(["agent", "send", "coder", "again"]),
      t.ctx(["agent", "history", "coder"]),
      t.bystander(),
    ]);
    assert(send.code !== 0 && send.stderr.includes("EFBIG"), `send: ${send.code} ${send.stderr}`);
    assert(
      history.code !== 0 && history.stderr.includes("EFBIG"),
      `history: ${history.code} ${history.stderr}`,
    );
    // The same instance serves another session of the agent at once.
    const other = await t.ctx(["agent", "send", "coder", "--session", "other", "hi"]);
    assertEquals({ code: other.code, stdout: other.stdout }, { code: 0, stdout: "hi\n" });
    await t.bystander();
  });
});
