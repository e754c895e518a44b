/** Capture: an endless stream is read only up to the drain bound, and only `limit` bytes are kept. */
import { assertEquals } from "../../tests/assert.ts";
import { Capture, utf8Cut } from "./capture.ts";

/** A stream that never ends on its own; counts what was pulled from it. */
function endless(chunk: Uint8Array): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled += chunk.length;
      c.enqueue(chunk);
    },
  }, { highWaterMark: 0 });
  return { stream, pulled: () => pulled };
}

Deno.test("Capture stops reading an endless stream past the drain bound and keeps only limit bytes", async () => {
  const out = endless(new TextEncoder().encode("y\n".repeat(2048)));
  const err = endless(new TextEncoder().encode("e"));
  let floods = 0;
  const cap = new Capture({ limit: 1000, drain: 50_000, onFlood: () => floods++ });
  const both = Promise.all([cap.pump(out.stream, 0), cap.pump(err.stream, 1)]);
  // The caller ends the tool on flood; here the streams only stop when the capture stops them.
  await new Promise((r) => setTimeout(r, 0));
  await both.then(() => {}, () => {});
  const r = cap.result();
  assertEquals({ kept: r.bytes.length, truncated: r.truncated, floods }, {
    kept: 1000,
    truncated: true,
    floods: 1,
  });
  // Bounded while reading: at most one chunk past the drain bound was pulled.
  assertEquals(out.pulled() + err.pulled() <= 50_000 + 4096 + 1, true);
  assertEquals(new TextDecoder().decode(r.bytes), "y\n".repeat(500));
});

Deno.test("Capture keeps stdout then stderr and reports no truncation under the bound", async () => {
  const cap = new Capture({ limit: 100, drain: 1000, onFlood: () => {} });
  const s = (t: string) => ReadableStream.from([new TextEncoder().encode(t)]);
  await Promise.all([cap.pump(s("out\n"), 0), cap.pump(s("err\n"), 1)]);
  const r = cap.result();
  assertEquals(
    { text: new TextDecoder().decode(r.bytes), truncated: r.truncated, total: r.total },
    {
      text: "out\nerr\n",
      truncated: false,
      total: 8,
    },
  );
});

Deno.test("utf8Cut never splits a character", () => {
  const b = new TextEncoder().encode("aé€😀");
  assertEquals([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => utf8Cut(b, n)), [
    0,
    1,
    1,
    3,
    3,
    3,
    6,
    6,
    6,
    6,
    10,
  ]);
});
