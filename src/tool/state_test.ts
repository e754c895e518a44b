/** tsh load/pin state: bounded, LRU eviction of unpinned entries only, persisted in the home. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { load, parseState, readState, type TshState, unpin, writeState } from "./state.ts";

Deno.test("load() evicts the least recently used unpinned entry; pinned entries stay", async () => {
  const home = await Deno.makeTempDir();
  try {
    const s = readState(home);
    const e = (name: string) => ({ name, path: `/ctx/tool/${name}`, description: name });
    load(s, e("a"), { pin: true, capacity: 2 });
    load(s, e("b"), { capacity: 2 });
    assertEquals(load(s, e("c"), { capacity: 2 }), ["b"]);
    assertEquals(load(s, e("d"), { capacity: 2 }), ["c"]);
    unpin(s, "a");
    assertEquals(load(s, e("e"), { capacity: 2 }), ["a"]);
    writeState(home, s);
    assertEquals(readState(home).loaded.map((l) => [l.name, l.pinned]), [["d", false], [
      "e",
      false,
    ]]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("load() keeps pins past the capacity but never past max; a pin beyond max is ENOSPC, state unchanged", () => {
  const s: TshState = { version: 1, clock: 0, loaded: [] };
  const e = (name: string) => ({ name, path: `/ctx/tool/${name}`, description: name });
  load(s, e("a"), { pin: true, capacity: 1, max: 2 });
  load(s, e("b"), { pin: true, capacity: 1, max: 2 });
  const before = structuredClone(s);
  const err = assertThrows(() => load(s, e("c"), { pin: true, capacity: 1, max: 2 }), CtxError);
  assertEquals([err.errno, s], ["ENOSPC", before]);
  assertEquals(
    assertThrows(() => load(s, e("c"), { capacity: 1, max: 2 }), CtxError).errno,
    "ENOSPC",
  );
  unpin(s, "b");
  // Now b is evictable: loading c evicts it (capacity 1, pins exempt).
  assertEquals(load(s, e("c"), { capacity: 1, max: 2 }), ["b"]);
  assertEquals(s.loaded.map((l) => [l.name, l.pinned]), [["a", true], ["c", false]]);
});

Deno.test("parseState() refuses a state file off its shape (the sandbox writes the home): EIO", () => {
  const entry = { name: "t", path: "/ctx/tool/t", description: "d", pinned: false, used: 1 };
  const good = { version: 1, clock: 1, loaded: [entry] };
  assertEquals(parseState(JSON.stringify(good), "/s"), good);
  const bad: unknown[] = [
    { ...good, version: 2 },
    { ...good, clock: -1 },
    { ...good, clock: "1" },
    { ...good, extra: true },
    { version: 1, loaded: [] }, // no clock
    { ...good, loaded: {} },
    { ...good, loaded: [{ ...entry, description: { toString: "x" } }] },
    { ...good, loaded: [{ ...entry, pinned: "yes" }] },
    { ...good, loaded: [{ ...entry, used: 1.5 }] },
    { ...good, loaded: [{ ...entry, grant: "rwx" }] },
    { ...good, loaded: [null] },
    [],
  ];
  for (const b of bad) {
    const e = assertThrows(() => parseState(JSON.stringify(b), "/s"), CtxError, JSON.stringify(b));
    assertEquals(e.errno, "EIO", JSON.stringify(b));
  }
});
