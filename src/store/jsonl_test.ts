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

Deno.test("appendRecord() cuts a short write back off: no partial line stays (real RLIMIT_FSIZE)", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const limit = 64 * 1024 * 1024;
    const p = `${dir}/events.jsonl`;
    // A history 10 bytes below the file size limit: the next record can only partly fit.
    const f = Deno.openSync(p, { write: true, create: true, mode: 0o600 });
    f.truncateSync(limit - 10);
    f.seekSync(limit - 11, Deno.SeekMode.Start);
    f.writeSync(new TextEncoder().encode("\n"));
    f.close();
    const script = `${dir}/append.ts`;
    Deno.writeTextFileSync(
      script,
      `import { appendRecord } from ${JSON.stringify(new URL("./jsonl.ts", import.meta.url).href)};
try {
  appendRecord(${JSON.stringify(p)}, { type: "delta", text: "x".repeat(100) });
  console.log("appended");
} catch (e) {
  console.log(e.errno, e.message);
}`,
    );
    const deno = new URL("../../tools/deno", import.meta.url).pathname;
    const out = await new Deno.Command("prlimit", {
      args: [`--fsize=${limit}`, deno, "run", "-A", "--no-lock", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const said = new TextDecoder().decode(out.stdout).trim();
    assertEquals({ said, size: Deno.statSync(p).size }, {
      said: "EIO short append (10 of 127 bytes)",
      size: limit - 10,
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
