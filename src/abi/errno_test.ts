import { assertThrows } from "../../tests/assert.ts";
import { CtxError, ignore } from "./errno.ts";

Deno.test("ignore returns for an expected kind and rethrows any other", () => {
  ignore(new Deno.errors.NotFound("x"), Deno.errors.NotFound);
  ignore(new CtxError("ESRCH", "gone"), "ESRCH");
  ignore(Object.assign(new Error("x"), { code: "EINVAL" }), Deno.errors.NotFound, "EINVAL");
  const emfile = Object.assign(new Error("too many open files"), { code: "EMFILE" });
  assertThrows(() => ignore(emfile, Deno.errors.NotFound), Error, "too many open files");
  assertThrows(() => ignore(new Deno.errors.PermissionDenied("no"), Deno.errors.NotFound));
});
