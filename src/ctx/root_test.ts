/** findTree(): where ctx looks for the tree, in order. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { findTree, NoTreeError } from "./root.ts";

function layout(): { dir: string; system: string; checkout: string } {
  const dir = Deno.makeTempDirSync({ prefix: "ctx-root-" });
  const system = `${dir}/ctx`, checkout = `${dir}/checkout`;
  Deno.mkdirSync(system);
  Deno.mkdirSync(`${checkout}/.dev/ctx`, { recursive: true });
  return { dir, system, checkout };
}

Deno.test("findTree() takes --root, then CTX_ROOT, then the system mount, then the checkout's dev mount", () => {
  const l = layout();
  try {
    const o = { env: {}, system: l.system, checkout: l.checkout };
    assertThrows(() => findTree(o), NoTreeError); // nothing holds a tree, and no deno.json
    Deno.writeTextFileSync(`${l.checkout}/deno.json`, "{}");
    const e = assertThrows(() => findTree(o), NoTreeError) as NoTreeError;
    assertEquals(e.tried, [l.system, `${l.checkout}/.dev/ctx`]);
    Deno.writeTextFileSync(`${l.checkout}/.dev/ctx/status`, "state=online\n");
    assertEquals(findTree(o), { root: `${l.checkout}/.dev/ctx`, via: "dev" });
    Deno.writeTextFileSync(`${l.system}/status`, "state=online\n");
    assertEquals(findTree(o), { root: l.system, via: "/ctx" });
    const named = `${l.checkout}/.dev/ctx/`;
    assertEquals(findTree({ ...o, env: { CTX_ROOT: named } }), {
      root: `${l.checkout}/.dev/ctx`,
      via: "CTX_ROOT",
    });
    assertEquals(findTree({ ...o, root: l.system, env: { CTX_ROOT: named } }), {
      root: l.system,
      via: "--root",
    });
    const none = assertThrows(
      () => findTree({ ...o, env: { CTX_ROOT: l.dir } }),
      NoTreeError,
    ) as NoTreeError;
    assertEquals(none.tried, [`${l.dir} (CTX_ROOT)`]); // a named root is the only place looked
  } finally {
    Deno.removeSync(l.dir, { recursive: true });
  }
});
