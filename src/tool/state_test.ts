/** tsh load/pin state: bounded, LRU eviction of unpinned entries only, persisted in the home. */
import { assertEquals } from "../../tests/assert.ts";
import { load, readState, unpin, writeState } from "./state.ts";

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
