import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { appendRecord, readRecords } from "./jsonl.ts";

Deno.test("appendRecord() writes one line per record and readRecords() returns them", () => {
  const dir = Deno.makeTempDirSync();
  const p = `${dir}/events.jsonl`;
  appendRecord(p, { type: "start", run: "r" });
  appendRecord(p, { type: "delta", text: "a\nb" });
  assertEquals(
    Deno.readTextFileSync(p),
    '{"type":"start","run":"r"}\n{"type":"delta","text":"a\\nb"}\n',
  );
  assertEquals(readRecords(p), [{ type: "start", run: "r" }, { type: "delta", text: "a\nb" }]);
  assertEquals(Deno.statSync(p).mode! & 0o777, 0o600);
});

Deno.test("readRecords() reports a newline-less tail as EIO with the path and repairs nothing", () => {
  const dir = Deno.makeTempDirSync();
  const p = `${dir}/messages.jsonl`;
  Deno.writeTextFileSync(p, '{"a":1}\n{"a":');
  const e = assertThrows(() => readRecords(p), CtxError);
  assertEquals([e.errno, e.path], ["EIO", p]);
  const e2 = assertThrows(() => appendRecord(p, { a: 2 }), CtxError);
  assertEquals(e2.errno, "EIO");
  assertEquals(Deno.readTextFileSync(p), '{"a":1}\n{"a":');
});

Deno.test("readRecords() reports a malformed line as EIO", () => {
  const dir = Deno.makeTempDirSync();
  const p = `${dir}/x.jsonl`;
  Deno.writeTextFileSync(p, '{"a":1}\nnot json\n');
  assertEquals(assertThrows(() => readRecords(p), CtxError).errno, "EIO");
});
