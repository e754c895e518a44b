/** Issue 24 items 7, 11, 12: a terminal's socket trusts only the right peers, both ways, and bounds a resize. */
import { assertEquals } from "../assert.ts";
import { FRAME, MAX_COLS, MAX_ROWS, parseSize, sizePayload } from "../../src/abi/terminal.ts";
import { events, RawClient, startTerm, stopTerm, until } from "../fixture/mod.ts";

Deno.test("item 12: an attacher's 4000x4000 resize is clamped to the stated bound", async () => {
  const t = await startTerm(undefined, { size: "24x80" });
  try {
    const a = await RawClient.open(t.socket, "attach");
    await until(() => a.of(FRAME.snapshot).length === 1, "the attacher's snapshot");
    await a.send(FRAME.resize, sizePayload(4000, 4000));
    await until(() => a.of(FRAME.size).length === 1, "the size frame");
    assertEquals(parseSize(a.of(FRAME.size)[0].payload), { rows: MAX_ROWS, cols: MAX_COLS });
    const r = events(t).events.filter((e) => e.type === "pty.resize") as unknown as {
      rows: number;
      cols: number;
    }[];
    assertEquals(r.map((e) => [e.rows, e.cols]), [[MAX_ROWS, MAX_COLS]]);
    // The program's PTY has the clamped size too.
    await a.input("stty size\r");
    await until(() => a.output().includes(`${MAX_ROWS} ${MAX_COLS}`), "stty size");
    a.close();
  } finally {
    await stopTerm(t);
  }
});
