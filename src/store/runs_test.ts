/** The run index is a view: rebuilt from events.jsonl alone, open runs reported. */
import { assertEquals } from "../../tests/assert.ts";
import { appendRecord, readRecords } from "./jsonl.ts";
import { RunIndex } from "./runs.ts";
import { ignore } from "../abi/errno.ts";

Deno.test("rebuild() restores ids, digests, statuses and call counts, and lists unfinished runs", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const ev = `${dir}/events.jsonl`;
    appendRecord(ev, { type: "start", run: "r1", client_id: "a", digest: "d1", ts: 1 });
    appendRecord(ev, { type: "tool_call", run: "r1", id: "c" });
    appendRecord(ev, { type: "done", run: "r1", status: "ok", ts: 2 });
    appendRecord(ev, { type: "start", run: "r2", client_id: "b", digest: "d2", ts: 3 });
    const idx = new RunIndex(":memory:");
    const open = idx.rebuild([{ dir, events: readRecords(ev) }]);
    assertEquals(open.map((r) => r.run), ["r2"]);
    assertEquals(idx.lookup(dir, "a"), {
      run: "r1",
      dir,
      client_id: "a",
      digest: "d1",
      status: "ok",
      started: 1,
      ended: 2,
      calls: 1,
    });
    assertEquals(idx.get("r2")?.status, "active");
    assertEquals(idx.lookup(dir, "zz"), undefined);
    idx.close();
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("RunIndex keeps its database file 0600 (and SQLite gives -wal/-shm the same mode)", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/runs.sqlite`;
    Deno.writeFileSync(path, new Uint8Array(), { mode: 0o644 });
    Deno.chmodSync(path, 0o644); // as an older daemon left it
    const idx = new RunIndex(path);
    idx.begin({ run: "r1", dir: "/s", client_id: "a", digest: "d", started: 1 });
    const modes = ["", "-wal", "-shm"].map((x) => {
      try {
        return (Deno.statSync(path + x).mode ?? 0) & 0o777;
      } catch (e) {
        ignore(e, Deno.errors.NotFound);
        return null;
      }
    });
    idx.close();
    assertEquals(modes, [0o600, 0o600, 0o600]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
