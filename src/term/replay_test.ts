import { assertEquals } from "../../tests/assert.ts";
import type { TerminalEvent } from "../abi/terminal.ts";
import { replay } from "./replay.ts";

const out = (seq: number, ts: number, text: string): TerminalEvent => ({
  seq,
  ts,
  type: "pty.output",
  data_b64: btoa(text),
});

Deno.test("replay() writes the output in order, pausing the recorded gaps (scaled, capped)", async () => {
  const evs: TerminalEvent[] = [
    out(1, 100, "a"),
    { seq: 2, ts: 100.5, type: "pty.resize", rows: 10, cols: 20 },
    out(3, 101, "b"),
    out(4, 111, "c"),
  ];
  const waits: number[] = [];
  let text = "";
  const n = await replay(evs, {
    speed: 2,
    maxWait: 3,
    write: (b) => void (text += new TextDecoder().decode(b)),
    sleep: (ms) => Promise.resolve(void waits.push(ms)),
  });
  assertEquals([n, text, waits], [3, "abc", [500, 3000]]);
  const none: number[] = [];
  await replay(evs, {
    noWait: true,
    write: () => {},
    sleep: (ms) => Promise.resolve(void none.push(ms)),
  });
  assertEquals(none, []);
});
