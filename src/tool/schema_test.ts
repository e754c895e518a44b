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

Deno.test("validate() refuses a schema keyword it cannot enforce, and one of the wrong shape; annotations pass", () => {
  const path = { type: "string", description: "d" };
  const cases: [Record<string, unknown>, string][] = [
    [
      { type: "object", properties: { path: { type: "string", pattern: "^/" } } },
      'tool schema $.properties.path has the unsupported keyword "pattern"',
    ],
    [{ anyOf: [{ type: "string" }] }, 'tool schema $ has the unsupported keyword "anyOf"'],
    [
      { type: "array", items: { $ref: "#/x" } },
      'tool schema $.items has the unsupported keyword "$ref"',
    ],
    [
      { type: "object", additionalProperties: { type: "string" } },
      'tool schema $ "additionalProperties" is object, expected boolean',
    ],
    [{ type: "object", required: "path" }, 'tool schema $ "required" is string, expected array'],
    [{ type: ["string", "null"] }, 'tool schema $ "type" is array, expected string'],
    [{ type: "text" }, 'tool schema $ "type" "text" is not a JSON type'],
    [
      { type: "object", properties: { path: 1 } },
      'tool schema $ property "path" is not a schema object',
    ],
  ];
  for (const [s, message] of cases) {
    // the input would pass every enforced rule: only the schema is refused
    const e = assertThrows(() => validate({ path: "/x" }, s), CtxError);
    assertEquals([e.errno, e.message], ["EINVAL", message]);
  }
  validate({ path: "x" }, {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "t",
    $comment: "c",
    type: "object",
    properties: { path: { ...path, default: "x", examples: ["x"] } },
    required: ["path"],
    additionalProperties: false,
  });
});

Deno.test("every built-in tool's schema is inside the enforced subset", () => {
  const input: Record<string, Record<string, unknown>> = {
    "fs.read": { path: "x" },
    "fs.list": { path: "x" },
    "fs.stat": { path: "x" },
    "fs.write": { path: "x", content: "" },
    "fs.replace": { path: "x", old: "a", new: "b" },
    bash: { command: "true" },
  };
  assertEquals(BUILTIN_TOOLS.map((t) => t.name).sort(), Object.keys(input).sort());
  for (const t of BUILTIN_TOOLS) validate(input[t.name], t.schema);
});
