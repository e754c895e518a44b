import {
  formatCap,
  formatDefaults,
  formatDriver,
  formatFallback,
  formatModelId,
  formatModelRef,
  parseCap,
  parseDefaults,
  parseDriver,
  parseFallback,
  parseModelId,
  parseModelRef,
  routeFor,
} from "./model.ts";
import { checkTable } from "../../tests/table.ts";
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

Deno.test("id: accept/reject table (native model id line)", () => {
  checkTable(parseModelId, formatModelId, {
    control: "id",
    accept: [["gpt-4o-mini\n", "gpt-4o-mini"], ["llama3.1:8b\n", "llama3.1:8b"]],
    reject: [
      ["", "EINVAL", "missing value"],
      ["a b\n", "EINVAL", "printable ASCII"],
      ["x", "EINVAL", "must end with a newline"],
    ],
  });
});

Deno.test("default: accept/reject table (base_url, slot, script; no secrets)", () => {
  checkTable(parseDefaults, formatDefaults, {
    control: "default",
    accept: [
      ["", {}],
      ["base_url=http://127.0.0.1:11434/v1\n", { base_url: "http://127.0.0.1:11434/v1" }],
      [
        "base_url=https://api.example.com/v1/\n",
        { base_url: "https://api.example.com/v1" },
        "base_url=https://api.example.com/v1\n",
      ],
      [
        "# local\nscript=demo.jsonl\n\nslot=work\n",
        { script: "demo.jsonl", slot: "work" },
        "slot=work\nscript=demo.jsonl\n",
      ],
    ],
    reject: [
      ["api_key=sk-1\n", "EINVAL", `key "api_key" is not one of base_url, slot, script`],
      ["base_url=ftp://x\n", "EINVAL", "is not http(s)"],
      ["base_url=https://u:p@x/\n", "EINVAL", "has credentials"],
      ["base_url=nope\n", "EINVAL", "is not a URL"],
      ["script=../x\n", "EINVAL", "relative path"],
      ["script=/etc/passwd\n", "EINVAL", "relative path"],
      ["slot=A\n", "EINVAL", `slot "A"`],
      ["base_url=http://a\nbase_url=http://b\n", "EINVAL", `key "base_url" repeats`],
      ["=x\n", "EINVAL", "is not key=value"],
    ],
  });
});
