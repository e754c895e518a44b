/** Issue 25 item 5: a refused control write through the mount says why (`ctx why PATH`), to its writer only; the daemon log names only real refusals. */
import { assertEquals, assertMatch, assertStringIncludes } from "../assert.ts";
import { sh, withTarget } from "../fixture/mod.ts";

Deno.test("ctx why PATH: the rule a shell write broke, the writer's own only; an accepted write clears it; the log has no false 'file is empty'", async () => {
  await withTarget(async (t) => {
    const rel = "agent/coder.d/window";
    const control = `${t.tree.mount}/${rel}`;
    const why = async (uid?: number) => {
      const r = await t.ctx(["why", rel], { uid });
      assertEquals(r.code, 0, r.stderr);
      return r.stdout;
    };
    assertMatch(await why(), /no refused write of yours/);

    // The shell sees only the errno.
    const bad = await sh(`echo lots > ${control}`);
    assertEquals(bad.code, 1);
    assertStringIncludes(bad.stderr, "Invalid argument");
    assertMatch(await why(), /^agent\/coder\.d\/window: EINVAL: .*"lots".*\(at \d{4}-/);
    // Another user learns nothing of root's write.
    assertMatch(await why(1000), /no refused write of yours/);

    const bare = await sh(`printf 4096 > ${control}`);
    assertEquals(bare.code, 1);
    assertStringIncludes(await why(), "must end with a newline");

    // An accepted write: nothing is why any more, and the log says nothing of it.
    const good = await sh(`echo 4096 > ${control}`);
    assertEquals(good.code, 0, good.stderr);
    assertEquals(Deno.readTextFileSync(control), "4096\n");
    assertMatch(await why(), /no refused write of yours/);
    const log = t.daemon.log();
    assertEquals(log.includes("the file is empty"), false, log);
    assertEquals(
      (log.match(/refused uid 0 write of \/ctx\/agent\/coder\.d\/window/g) ?? []).length,
      2,
      log,
    );
    await t.bystander();
  });
});
