import {
  formatCap,
  formatDriver,
  formatFallback,
  formatModelRef,
  parseCap,
  parseDriver,
  parseFallback,
  parseModelRef,
  routeFor,
} from "./model.ts";
import { checkTable } from "./_table.ts";
import { assertEquals } from "../../tests/assert.ts";

Deno.test("model: accept/reject table (model reference line)", () => {
  checkTable(parseModelRef, formatModelRef, {
    control: "model",
    accept: [["debug/echo\n", "debug/echo"], ["main\n", "main"], [
      "openai/gpt-5.5\n",
      "openai/gpt-5.5",
    ]],
    reject: [
      ["debug/echo", "EINVAL", "must end with a newline"],
      ["debug/echo\n\n", "EINVAL", "extra lines"],
      ["a/b/c\n", "EINVAL", "more than two components"],
      ["/debug/echo\n", "EINVAL", `starts with "/"`],
      ["debug/ echo\n", "EINVAL", "contains whitespace"],
      ["debug/echo.sock\n", "EINVAL", `ends with ".sock"`],
      ["", "EINVAL", "missing value"],
    ],
  });
});

Deno.test("driver: accept/reject table (legacy name or route table)", () => {
  checkTable(parseDriver, formatDriver, {
    control: "driver",
    accept: [
      ["debug\n", { default: ["debug"] }],
      ["default=debug\n", { default: ["debug"] }, "debug\n"],
      ["agent=openai-responses,openai-chat\ndefault=openai-chat\n", {
        agent: ["openai-responses", "openai-chat"],
        default: ["openai-chat"],
      }, "default=openai-chat\nagent=openai-responses,openai-chat\n"],
      ["exec=a\nsocket=b\n", { exec: ["a"], socket: ["b"] }],
    ],
    reject: [
      ["", "EINVAL", "missing value"],
      ["debug", "EINVAL", "must end with a newline"],
      ["debug\nother\n", "EINVAL", `line 1 "debug" is not key=adapter,adapter`],
      ["chat=a\n", "EINVAL", `key "chat" is not one of default, exec, socket, agent`],
      ["default=a\ndefault=b\n", "EINVAL", `key "default" repeats`],
      ["default=a,a\n", "EINVAL", `adapter "a" repeats`],
      ["default=\n", "EINVAL", `adapter "" is not`],
      ["default=a,\n", "EINVAL", `adapter "" is not`],
      ["default=A\n", "EINVAL", `adapter "A" is not`],
      ["default = a\n", "EINVAL", `key "default " is not one of`],
      ["Debug\n", "EINVAL", `adapter "Debug"`],
    ],
  });
  assertEquals(routeFor({ agent: ["x"], default: ["y"] }, "agent"), ["x"]);
  assertEquals(routeFor({ agent: ["x"], default: ["y"] }, "exec"), ["y"]);
  assertEquals(routeFor({ agent: ["x"] }, "exec"), []);
});

Deno.test("cap: accept/reject table (stable words; provider-format words forbidden)", () => {
  checkTable(parseCap, formatCap, {
    control: "cap",
    accept: [["", []], ["chat\nstream\n", ["chat", "stream"]], ["tool_call_syntax\n", [
      "tool_call_syntax",
    ]]],
    reject: [
      ["chat", "EINVAL", "must end with a newline"],
      [
        "openai_responses\n",
        "EINVAL",
        `"openai_responses" is a provider-format word and is forbidden`,
      ],
      ["native_thread\n", "EINVAL", "forbidden"],
      ["telepathy\n", "EINVAL", `"telepathy" is not a stable cap word`],
      ["Chat\n", "EINVAL", "is not a stable cap word"],
      ["chat\nchat\n", "EINVAL", `line 2 repeats "chat"`],
      ["chat\n\n", "EINVAL", "line 2 is blank"],
    ],
  });
});

Deno.test("fallback: accept/reject table (provider/model refs, # comments)", () => {
  checkTable(parseFallback, formatFallback, {
    control: "fallback",
    accept: [
      ["", []],
      ["openai/gpt-5.5\n", ["openai/gpt-5.5"]],
      [
        "# cheaper first\nopenai/a\n\nanthropic/b\n",
        ["openai/a", "anthropic/b"],
        "openai/a\nanthropic/b\n",
      ],
    ],
    reject: [
      ["openai/a", "EINVAL", "must end with a newline"],
      ["main\n", "EINVAL", `"main" is not <provider>/<model>`],
      ["openai/a\nopenai/a\n", "EINVAL", "line 2 repeats"],
      ["a/b/c\n", "EINVAL", "more than two components"],
      [" openai/a\n", "EINVAL", "leading or trailing whitespace"],
      ["openai/a # why\n", "EINVAL", "contains whitespace"],
    ],
  });
});
