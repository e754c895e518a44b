import { assertEquals } from "../../tests/assert.ts";
import {
  DEFAULT_TEMPLATE,
  EMPTY,
  estimateTokens,
  mergeRules,
  PROMPT_VARS,
  type PromptVar,
  renderTemplate,
  RUNTIME_CONTRACT,
  skillsBlock,
  toolBlock,
} from "./prompt.ts";
import { outputReserve, promptBudget, skillBudget } from "./window.ts";

const vars = Object.fromEntries(PROMPT_VARS.map((v) => [v, `<${v}>`])) as Record<
  PromptVar,
  string
>;

Deno.test("renderTemplate() substitutes known variables once and keeps unknown ones", () => {
  const v = { ...vars, rules: "{{agent}} from a file" };
  assertEquals(
    renderTemplate("{{agent}} {{rules}} {{x}} {{runtime_contract}}", v),
    "<agent> {{agent}} from a file {{x}} <runtime_contract>",
  );
});

Deno.test("renderTemplate() appends the runtime contract to a template without it", () => {
  assertEquals(
    renderTemplate("Hi {{agent}}\n\n", { ...vars, runtime_contract: RUNTIME_CONTRACT }),
    `Hi <agent>\n\n## Runtime Contract\n\n${RUNTIME_CONTRACT}\n`,
  );
});

Deno.test("the default template uses every variable but model, session, cwd and current_time", () => {
  const used = PROMPT_VARS.filter((v) => DEFAULT_TEMPLATE.includes(`{{${v}}}`));
  const not = ["model", "session", "cwd", "current_time"];
  assertEquals(used, PROMPT_VARS.filter((v) => !not.includes(v)));
});

Deno.test("mergeRules() wraps each file under its path, marks cut files, and bounds the total", () => {
  assertEquals(mergeRules([]), EMPTY.rules);
  assertEquals(
    mergeRules([{ path: "/a/AGENTS.md", text: "one\n" }, {
      path: "/b/AGENTS.md",
      text: "two",
      truncated: true,
    }]),
    "### /a/AGENTS.md\n\none\n\n### /b/AGENTS.md\n\ntwo\n\n(truncated)",
  );
  const out = mergeRules([
    { path: "/a", text: "x".repeat(50) },
    { path: "/b", text: "y".repeat(50) },
    { path: "/c", text: "z" },
  ], 70);
  assertEquals(
    out,
    `### /a\n\n${"x".repeat(50)}\n\n### /b\n\nyy\n\n(truncated)\n\n` +
      "(left out, over 70 characters of rules: /c)",
  );
});

Deno.test("skillsBlock() shortens descriptions first, then omits skills with a warning", () => {
  const s = (n: number, d: string) => ({ name: `s${n}`, description: d, path: `/p/${n}` });
  assertEquals(skillsBlock([], 100), EMPTY.skills);
  assertEquals(skillsBlock([s(1, "short")], 100), "- s1: short (/p/1)");
  const long = "d".repeat(300);
  const shortened = skillsBlock([s(1, long)], 300);
  assertEquals(shortened.split("\n").length, 2);
  assertEquals(shortened.split("\n")[0], `- s1: ${"d".repeat(157)}... (/p/1)`);
  assertEquals(shortened.split("\n")[1].startsWith("(warning: skill descriptions shortened"), true);
  const omitted = skillsBlock([s(1, long), s(2, long), s(3, long)], 300);
  assertEquals(omitted.split("\n").length, 2);
  assertEquals(
    omitted.split("\n")[1],
    "(warning: 2 of 3 skills omitted: their metadata is over the skills budget of 300 characters)",
  );
});

Deno.test("toolBlock() lists pinned tools first, metadata only", () => {
  assertEquals(toolBlock([]), EMPTY.tool_injection);
  assertEquals(
    toolBlock([
      { name: "a", description: "first\n tool", pinned: false },
      { name: "b", description: "second", pinned: true },
    ]),
    "Loaded tools (call them through tsh, e.g. tsh TOOL ARGS):\n- b (pinned): second\n- a: first tool",
  );
});

Deno.test("window budget: reserve min(4096, max(1, n/4)); admission n*4 - 4*reserve bytes; skills 2% capped at 8000", () => {
  assertEquals([outputReserve(1), outputReserve(7), outputReserve(2000), outputReserve(131072)], [
    1,
    1,
    500,
    4096,
  ]);
  assertEquals([promptBudget(2000), promptBudget(131072)], [6000, 131072 * 4 - 4 * 4096]);
  assertEquals([skillBudget(undefined), skillBudget(2000), skillBudget(131072)], [8000, 160, 8000]);
  assertEquals([estimateTokens(""), estimateTokens("abcde"), estimateTokens("é")], [0, 2, 1]);
});
