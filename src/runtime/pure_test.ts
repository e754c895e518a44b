/** The runtime's pure parts: run ids, a step's environment, stored content as text. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { type ExecRun, stepEnv } from "./exec.ts";
import { textOf } from "./turn.ts";
import { newRunId } from "./recorder.ts";

Deno.test("newRunId(): ctx- and 32 hex digits from the CSPRNG, never repeated", () => {
  const ids = new Set(Array.from({ length: 1000 }, newRunId));
  assertEquals(ids.size, 1000);
  for (const id of ids) assert(/^ctx-[0-9a-f]{32}$/.test(id), id);
});

Deno.test("stepEnv(): the agent's env, then runtime-owned CTX_* on top; a planted window var is replaced", () => {
  const x = (window?: number) =>
    ({
      agent: {
        name: "coder",
        window,
        env: { FOO: "1", CTX_AGENT: "forged", CTX_CONTEXT_WINDOW_TOKENS: "999", CTX_RUN_ID: "x" },
      },
      session: "default",
      run: { id: "ctx-00" },
    }) as unknown as ExecRun; // stepEnv reads only these fields
  assertEquals(stepEnv(x(), 2), {
    FOO: "1",
    CTX_AGENT: "coder",
    CTX_SESSION: "default",
    CTX_RUN_ID: "ctx-00",
    CTX_AGENT_STEP: "2",
    CTX_AGENT_STEPS: "9",
  });
  const w = stepEnv(x(8192), 1);
  assertEquals([w.CTX_CONTEXT_WINDOW_TOKENS, w.CTX_CONTEXT_WINDOW_CHARS], ["8192", "32768"]);
  const big = stepEnv(x(4294967295), 1);
  assertEquals(big.CTX_CONTEXT_WINDOW_CHARS, "4294967295"); // clamped to u32
});

Deno.test("textOf(): strings, text parts and tool results; anything else is empty", () => {
  assertEquals(textOf("plain"), "plain");
  assertEquals(
    textOf([{ type: "text", text: "a" }, { type: "tool_result", content: "b" }, { type: "image" }]),
    "ab",
  );
  assertEquals([textOf(null), textOf({ text: "x" }), textOf(7)], ["", "", ""]);
});
