/** The JSON-Schema subset and tsh's argument mapping. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { BUILTIN_TOOLS } from "../abi/builtin.ts";
import { argsToInput, validate } from "./schema.ts";

const schema = (name: string) => BUILTIN_TOOLS.find((t) => t.name === name)!.schema; // exists

Deno.test("argsToInput() fills required properties in order; the last takes the rest", () => {
  assertEquals(argsToInput(["a.txt", "--limit", "10"], schema("fs.read")), {
    path: "a.txt",
    limit: 10,
  });
  assertEquals(argsToInput(["echo", "hi", "there"], schema("bash")), { command: "echo hi there" });
  assertEquals(argsToInput(['{"path":"x"}'], schema("fs.list")), { path: "x" });
});

Deno.test("validate() names the rule that failed", () => {
  const cases: [unknown, string][] = [
    [{}, 'input $ is missing the required property "path"'],
    [{ path: 1 }, "input $.path is integer, expected string"],
    [{ path: "x", limit: 0 }, "input $.limit is 0, below the minimum 1"],
    [{ path: "x", perm: "rwx" }, 'input $ has the unknown property "perm"'],
  ];
  for (const [input, message] of cases) {
    const e = assertThrows(() => validate(input, schema("fs.read")), CtxError);
    assertEquals([e.errno, e.message], ["EINVAL", message]);
  }
  validate({ path: "x", offset: 0, limit: 5 }, schema("fs.read"));
});
