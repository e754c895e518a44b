/** The recorder's promises to a client, now that state and message writes are fsynced off the JS thread. */
import { assertEquals } from "../../tests/assert.ts";
import type { Frame } from "../abi/frames.ts";
import { readRecords } from "../store/jsonl.ts";
import { RunIndex } from "../store/runs.ts";
import { openSession } from "../store/session/files.ts";
import { sessionRef } from "../store/session/ref.ts";
import type { Conn } from "./conn.ts";
import { newRunId, Run } from "./recorder.ts";

Deno.test("Run: no frame after activate() is sent before state is active; done finds the messages stored and the final state and latest.md in place", async () => {
  const root = Deno.makeTempDirSync();
  try {
    const ref = sessionRef({
      root,
      run: `${root}/run`,
      agent: "a",
      session: "s",
      scope: "private",
      uid: 0,
      gid: 0,
    });
    openSession(ref);
    const read = (n: string) => Deno.readTextFileSync(`${ref.dir}/${n}`);
    // What the client could read at the moment each frame reached it.
    const seen: { type: string; state: string; latest: string; messages: number }[] = [];
    const conn = {
      closed: false,
      send(f: Frame) {
        seen.push({
          type: f.type,
          state: read("state"),
          latest: read("latest.md"),
          messages: readRecords(`${ref.dir}/messages.jsonl`).length,
        });
        return Promise.resolve();
      },
    } as unknown as Conn;
    const index = new RunIndex(":memory:");
    const run = new Run({ id: newRunId(), ref, index, origin: conn });
    index.begin({ run: run.id, dir: ref.dir, client_id: "c", digest: "d", started: 1 });
    run.activate();
    run.message({ role: "user", content: "hi" });
    await run.emit({ type: "delta", text: "hi" });
    run.message({ role: "assistant", content: [{ type: "text", text: "hi" }] });
    await run.emit({ type: "message", role: "assistant", content: [{ type: "text", text: "hi" }] });
    await run.finish("ok", { latest: "hi" });
    // Output frames do not hold the run up (the writes after them may land first), but none is
    // streamed before `active` is in place, and done only once everything is.
    assertEquals(seen.map((x) => x.type), ["delta", "message", "done"]);
    for (const x of seen.slice(0, 2)) {
      assertEquals(["active\n", "done\n"].includes(x.state), true, x.state);
      assertEquals(x.messages >= 1, true);
    }
    assertEquals(seen[2], { type: "done", state: "done\n", latest: "hi", messages: 2 });
    assertEquals(
      [...Deno.readDirSync(ref.dir)].filter((e) => e.name.startsWith(".")).map((e) => e.name),
      [],
    );
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
