import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { MAX_OUTPUT_CHUNK, parseTerminalEvents } from "../abi/terminal.ts";
import { Recorder } from "./record.ts";
import type { TerminalMeta } from "../abi/terminal.ts";

const meta = (dir: string): TerminalMeta => ({
  id: "t1",
  agent: "a",
  session: "s",
  owner: "0",
  cwd: "/workspace",
  command: ["sh"],
  state: "created",
  socket: `${dir}/main.sock`,
  created_at: 1,
});

Deno.test("Recorder writes seq-ordered whole lines, output coalesced into bounded chunks, before later events", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = Recorder.create(`${dir}/t1`, meta(dir));
    assertEquals(Deno.readTextFileSync(`${dir}/t1/state`), "created\n");
    r.event({ type: "terminal.start", command: ["sh"], rows: 24, cols: 80, pid: 7 });
    r.setState("running");
    const big = new Uint8Array(MAX_OUTPUT_CHUNK * 2 + 10).fill(0x61);
    for (let i = 0; i < big.length; i += 1000) r.output(big.subarray(i, i + 1000));
    r.output(new TextEncoder().encode("tail"));
    r.event({ type: "process.exit", exit_code: 0, signal: null });
    r.setState("exited", { exit_code: 0 });
    await r.close();
    const { events, torn } = parseTerminalEvents(Deno.readTextFileSync(`${dir}/t1/events.jsonl`));
    assertEquals(torn, false);
    assertEquals(events.map((e) => e.seq), events.map((_, i) => i + 1));
    assertEquals(events.map((e) => e.type), [
      "terminal.start",
      "pty.output",
      "pty.output",
      "pty.output",
      "process.exit",
    ]);
    const sizes = events.filter((e) => e.type === "pty.output").map((e) =>
      atob((e as { data_b64: string }).data_b64).length
    );
    assertEquals(sizes, [MAX_OUTPUT_CHUNK, MAX_OUTPUT_CHUNK, 14]);
    assertEquals(JSON.parse(Deno.readTextFileSync(`${dir}/t1/meta.json`)).state, "exited");
    assertEquals(Deno.readTextFileSync(`${dir}/t1/status`), "exited\n");
    assertEquals(Deno.readTextFileSync(`${dir}/t1/owner`), "0\n");
    assertEquals(Deno.readTextFileSync(`${dir}/t1/cwd`), "/workspace\n");
    assertEquals((Deno.statSync(`${dir}/t1/events.jsonl`).mode ?? 0) & 0o777, 0o600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Recorder refuses a resource that was already recorded (EEXIST)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = Recorder.create(`${dir}/t1`, meta(dir));
    await r.close();
    assertThrows(() => Recorder.create(`${dir}/t1`, meta(dir)), Error, "already recorded");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("parseTerminalEvents leaves a torn last line out and flags it; a bad whole line throws", () => {
  const a = JSON.stringify({ seq: 1, ts: 1, type: "pty.output", data_b64: "aGk=" });
  const b = JSON.stringify({ seq: 2, ts: 2, type: "process.exit", exit_code: 0, signal: null });
  assertEquals(parseTerminalEvents(`${a}\n${b}\n`).events.length, 2);
  const torn = parseTerminalEvents(`${a}\n${b.slice(0, 20)}`);
  assertEquals([torn.events.length, torn.torn], [1, true]);
  assertEquals(parseTerminalEvents(""), { events: [], torn: false });
  assertThrows(() => parseTerminalEvents(`${a}\n{"seq":1}\n`), Error, "line 2");
  assertThrows(() => parseTerminalEvents(`${b}\n${a}\n`), Error, "seq 1 after 2");
  assert(parseTerminalEvents(`${a}\n`).events[0].type === "pty.output");
});
