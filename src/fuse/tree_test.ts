/** Tree.lstatRaw keeps the backing cache true: a cached directory replaced behind the mount is dropped. */
import { assert, assertEquals } from "../../tests/assert.ts";
import * as libc from "../sys/libc.ts";
import { Tree } from "./tree.ts";

function tree(root: string): Tree {
  return new Tree({
    root,
    run: "/nonexistent",
    bins: {},
    ttl: 0,
    status: () => "",
    commit: () => {
      throw new Error("no commits here");
    },
    check: () => {
      throw new Error("no commits here");
    },
    controlKind: () => "unknown",
    secret: () => false,
    owner: () => 0,
    creating: () => false,
  });
}

Deno.test("Tree.lstatRaw of a cached directory that another one replaced behind the mount drops it: the next call below reaches the new one", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/home/1/d`, { recursive: true });
    Deno.writeTextFileSync(`${root}/home/1/d/f`, "old");
    const t = tree(root);
    const f = t.info("home/1/d/f"), d = t.info("home/1/d");
    const ino = () => (libc.statBytes.view.getUint32(libc.statBytes.layout.ino, true));
    assertEquals(t.lstatRaw("home/1/d/f", f), 0); // caches home/1/d as f's parent
    const before = ino();
    assertEquals(t.lstatRaw("home/1/d", d), 0); // the same directory: kept
    assertEquals(t.lstatRaw("home/1/d/f", f), 0);
    assertEquals(ino(), before);
    Deno.renameSync(`${root}/home/1/d`, `${root}/home/1/old`);
    Deno.mkdirSync(`${root}/home/1/d`);
    Deno.writeTextFileSync(`${root}/home/1/d/f`, "new");
    assertEquals(t.lstatRaw("home/1/d/f", f), 0);
    assertEquals(ino(), before, "the cached fd still names the old directory");
    assertEquals(t.lstatRaw("home/1/d", d), 0); // finds another directory there: dropped
    t.back.settle();
    assertEquals(t.lstatRaw("home/1/d/f", f), 0);
    const now = Deno.statSync(`${root}/home/1/d/f`).ino;
    assert(ino() !== before && ino() === now, `now ${ino()}, want ${now}`);
    Deno.removeSync(`${root}/home/1/d`, { recursive: true });
    assertEquals(t.lstatRaw("home/1/d", d), -2); // gone: ENOENT, and its cache entry with it
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
