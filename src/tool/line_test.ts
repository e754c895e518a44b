import { assertEquals } from "../../tests/assert.ts";
import { LineEditor, type Tty } from "./line.ts";

/** A terminal that yields the given key chunks, then end of input. */
function fake(chunks: string[]): Tty & { raw: boolean[] } {
  const enc = new TextEncoder();
  const raw: boolean[] = [];
  return {
    raw,
    read: (buf) => {
      const c = chunks.shift();
      if (c === undefined) return Promise.resolve(null);
      const b = enc.encode(c);
      buf.set(b);
      return Promise.resolve(b.length);
    },
    write: () => {},
    setRaw: (r) => void raw.push(r),
  };
}

Deno.test("LineEditor edits at the cursor, recalls history, drops a line on Ctrl+C, ends on Ctrl+D", async () => {
  const tty = fake([
    "helo",
    "\x1b[D", // left
    "l\r", // hello
    "\x1b[Ax\r", // up: hello, then x
    "abc\x03", // Ctrl+C drops abc
    "wor\x1b[Hsay \x1b[Fld\r", // Home, End
    "zz\x7f\x15ok\r", // Backspace, Ctrl+U
    "\x04",
  ]);
  const ed = new LineEditor(tty, { history: ["old"] });
  const lines: (string | null)[] = [];
  for (;;) {
    const l = await ed.readLine("> ");
    lines.push(l);
    if (l === null) break;
    ed.remember(l);
  }
  assertEquals(lines, ["hello", "hellox", "say world", "ok", null]);
  assertEquals(tty.raw.filter((r) => !r).length, 5, "raw mode is left after every line");
});

Deno.test("LineEditor splits pasted lines and keeps a multi-byte character whole", async () => {
  const ed = new LineEditor(fake(["one\rtwo\rdr\u00e9", "am\r"]));
  assertEquals(
    [await ed.readLine(""), await ed.readLine(""), await ed.readLine(""), await ed.readLine("")],
    ["one", "two", "dr\u00e9am", null],
  );
});
