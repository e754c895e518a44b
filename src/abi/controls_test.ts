import {
  AGENT_CONTROLS,
  controlMode,
  CONTROLS,
  controlSpec,
  isSecretControl,
  MODEL_CONTROLS,
  SECRET_CONTROLS,
  TOOL_CONTROLS,
} from "./controls.ts";
import { CtxError } from "./errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

/** name -> [writable, single, required] for a whole table. */
function flags(table: typeof AGENT_CONTROLS) {
  return Object.fromEntries(
    Object.entries(table).map(([k, s]) => [k, [s.writable, s.single, s.required]]),
  );
}

Deno.test("AGENT_CONTROLS lists every agent control with its flags", () => {
  assertEquals(flags(AGENT_CONTROLS), {
    owner: [true, true, true],
    uid: [true, true, false],
    gid: [true, true, false],
    groups: [true, false, false],
    label: [true, true, true],
    root: [true, true, false],
    cwd: [true, true, false],
    env: [true, false, false],
    path: [true, false, false],
    mount: [true, false, false],
    model: [true, true, true],
    window: [true, true, false],
    perm: [true, true, true],
    abi: [true, true, true],
    approval: [true, true, false],
    rlimit: [true, false, false],
    tools: [true, false, false],
    policy: [true, false, false],
    "system.md": [true, false, false],
    "prompt.template.md": [true, false, false],
    "meta.json": [true, false, false],
    status: [false, true, false],
    pid: [false, true, false],
    log: [false, false, false],
  });
});

Deno.test("MODEL_CONTROLS and TOOL_CONTROLS list their controls; limit is read-only", () => {
  assertEquals(flags(MODEL_CONTROLS), {
    driver: [true, false, true],
    id: [true, true, false],
    default: [true, false, false],
    cap: [true, false, false],
    limit: [false, true, false],
    fallback: [true, false, false],
    session: [true, true, false],
    effort: [true, true, false],
    status: [false, true, false],
    log: [false, false, false],
  });
  assertEquals(flags(TOOL_CONTROLS), {
    name: [true, true, true],
    description: [true, false, true],
    schema: [true, false, true],
    cap: [true, false, true],
    policy: [true, false, true],
    status: [false, true, false],
    log: [false, false, false],
  });
});

Deno.test("controlSpec() answers EINVAL 'not a control' for unknown names", () => {
  assertEquals(controlSpec("agent", "window"), AGENT_CONTROLS.window);
  for (
    const [kind, name] of [["agent", "iso"], ["model", "window"], ["tool", "toString"]] as const
  ) {
    const e = assertThrows(() => controlSpec(kind, name), CtxError);
    assertEquals(
      { errno: e.errno, message: e.message },
      { errno: "EINVAL", message: `"${name}" is not a control (not in the ${kind} table)` },
    );
  }
});

Deno.test("each table's parse/format pair round-trips a canonical value", () => {
  const samples: [typeof AGENT_CONTROLS, string, string][] = [
    [AGENT_CONTROLS, "window", "4096\n"],
    [AGENT_CONTROLS, "perm", "r-x\n"],
    [AGENT_CONTROLS, "mount", "/a\t/b\tro\t-\n"],
    [MODEL_CONTROLS, "limit", "unknown\n"],
    [MODEL_CONTROLS, "driver", "agent=a,b\n"],
    [TOOL_CONTROLS, "policy", "allow coder_t tool:fs.read execute\n"],
  ];
  for (const [table, name, text] of samples) {
    assertEquals(table[name].format(table[name].parse(text)), text, name);
  }
});

Deno.test("SECRET_CONTROLS is the agent's env and log: 0600, every other control 0644", () => {
  assertEquals(
    Object.fromEntries(Object.entries(SECRET_CONTROLS).map(([k, v]) => [k, [...v]])),
    { agent: ["env", "log"], model: [], tool: [] },
  );
  const modes = Object.entries(CONTROLS).flatMap(([kind, table]) =>
    Object.keys(table).map((n) => controlMode(kind as keyof typeof CONTROLS, n))
  );
  assertEquals(modes.filter((m) => m === 0o600).length, 2);
  assertEquals(modes.filter((m) => m !== 0o600 && m !== 0o644), []);
  assertEquals(
    [
      isSecretControl("agent", "env"),
      isSecretControl("agent", "perm"),
      isSecretControl("tool", "env"),
    ],
    [true, false, false],
  );
});
