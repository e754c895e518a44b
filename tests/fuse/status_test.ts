/** `/ctx/status` stays current for readers while a stat of it builds nothing. */
import { assert, assertEquals } from "../assert.ts";
import { cleanup, CONFIG, CTX, type Daemon, DENO, makeTree, startDaemon } from "../fixture/mod.ts";

Deno.test("every read of /ctx/status has the whole current text, however its size changed since a stat", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const path = `${tree.mount}/status`;
    const names = () =>
      JSON.parse(Deno.readTextFileSync(path)).agents.map((a: { name: string }) => a.name);
    assertEquals(names(), ["coder"]);
    const before = Deno.statSync(path).size;
    // Three new agents make the text longer than any size a stat reported before them.
    for (const n of ["alpha", "beta-with-a-long-name", "gamma"]) {
      const out = await new Deno.Command(DENO, {
        args: ["run", "-A", "--quiet", `--config=${CONFIG}`, CTX, "agent", "new", n],
        env: { CTX_ROOT: tree.mount },
        stdout: "null",
        stderr: "piped",
      }).output();
      assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
    }
    // A reader trusting the stat size (a read of exactly `size` bytes) would cut the JSON: these
    // read to EOF through the direct_io snapshot of their own open.
    assertEquals(names(), ["alpha", "beta-with-a-long-name", "coder", "gamma"]);
    const cat = await new Deno.Command("cat", { args: [path], stdout: "piped" }).output();
    const text = new TextDecoder().decode(cat.stdout);
    assert(text.length > before, `${text.length} > ${before}`);
    assertEquals(JSON.parse(text).agents.length, 4);
    // After an open, a stat reports that open's size.
    assertEquals(Deno.statSync(path).size, new TextEncoder().encode(text).length);
  } finally {
    await cleanup(tree, d);
  }
});
