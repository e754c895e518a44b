import { checkName, isModelPath, isName, nameFault } from "./names.ts";
import { CtxError } from "./errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

Deno.test("isName(): accept/reject table of single components", () => {
  const accept = ["coder", "a", "A9", "fs.read", "gpt-5.5", "x+y", "a_b", "9lives", "a".repeat(64)];
  const reject = [
    "",
    ".",
    "..",
    ".hidden",
    "-x",
    "_x",
    "a/b",
    "a b",
    " a",
    "a\n",
    "a\0",
    "a".repeat(65),
    "x.sock",
    "x.d",
    "é",
    "a:b",
    "a*",
  ];
  assertEquals(accept.filter((s) => !isName(s)), []);
  assertEquals(reject.filter((s) => isName(s)), []);
});

Deno.test("checkName(): each rejection is EINVAL and says which rule failed", () => {
  const cases: [string, string][] = [
    ["", `name "" is empty`],
    ["..", `name ".." is reserved ("." and ".." are not names)`],
    ["a b", `name "a b" contains whitespace`],
    ["-x", `name "-x" must start with a letter or digit, not "-"`],
    ["a*b", `name "a*b" contains "*" (allowed: letters, digits, . _ + -)`],
    ["x.sock", `name "x.sock" ends with ".sock" (reserved for sockets)`],
    ["x.d", `name "x.d" ends with ".d" (reserved for control directories)`],
    ["a".repeat(65), `name "${"a".repeat(57)}..." is 65 characters long (at most 64)`],
  ];
  for (const [s, message] of cases) {
    const e = assertThrows(() => checkName(s), CtxError);
    assertEquals({ errno: e.errno, message: e.message }, { errno: "EINVAL", message });
  }
  const e = assertThrows(() => checkName("a/b", { kind: "agent" }), CtxError);
  assertEquals(e.message, `agent name "a/b" contains "/"`);
});

Deno.test("checkName({kind: model}): <provider>/<model> or an alias, never more", () => {
  for (const ok of ["debug/echo", "openai/gpt-5.5", "main", "api.lmm.best/x"]) {
    assertEquals(checkName(ok, { kind: "model" }), ok);
  }
  const rows: [string, string][] = [
    ["a/b/c", "has more than two components"],
    ["/echo", `starts with "/"`],
    ["debug/", `model "" is empty`],
    ["debug/..", `model ".." is reserved`],
    ["x.sock/y", `provider "x.sock" ends with ".sock"`],
  ];
  for (const [s, why] of rows) {
    assertEquals(nameFault(s, "model")?.startsWith(why), true, `${s}: ${nameFault(s, "model")}`);
  }
  assertEquals(isName("a/b"), false);
  assertEquals([isModelPath("debug/echo"), isModelPath("main")], [true, false]);
});
