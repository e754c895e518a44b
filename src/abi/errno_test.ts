import { assertEquals, assertRejects, assertThrows } from "../../tests/assert.ts";
import { CtxError, ifExists, ignore } from "./errno.ts";

Deno.test("ignore returns for an expected kind and rethrows any other", () => {
  ignore(new Deno.errors.NotFound("x"), Deno.errors.NotFound);
  ignore(new CtxError("ESRCH", "gone"), "ESRCH");
  ignore(Object.assign(new Error("x"), { code: "EINVAL" }), Deno.errors.NotFound, "EINVAL");
  const emfile = Object.assign(new Error("too many open files"), { code: "EMFILE" });
  assertThrows(() => ignore(emfile, Deno.errors.NotFound), Error, "too many open files");
  assertThrows(() => ignore(new Deno.errors.PermissionDenied("no"), Deno.errors.NotFound));
});

Deno.test("ifExists reads an absent file as undefined, sync and async, and nothing else", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    assertEquals(ifExists(() => Deno.readTextFileSync(`${dir}/none`)), undefined);
    assertEquals(await ifExists(() => Deno.readTextFile(`${dir}/none`)), undefined);
    Deno.writeTextFileSync(`${dir}/f`, "x");
    assertEquals(ifExists(() => Deno.readTextFileSync(`${dir}/f`)), "x");
    assertThrows(
      () => ifExists(() => Deno.readTextFileSync(`${dir}/f/g`)),
      Deno.errors.NotADirectory,
    );
    assertEquals(
      ifExists(() => Deno.readTextFileSync(`${dir}/f/g`), Deno.errors.NotADirectory),
      undefined,
    );
    await assertRejects(() => ifExists(() => Deno.readTextFile(dir)), Error);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
