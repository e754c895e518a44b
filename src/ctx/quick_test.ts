/** quick(): the command lines ctx runs without commander, and the ones it leaves to it. */
import { assertEquals } from "../../tests/assert.ts";
import { quick } from "./quick.ts";

Deno.test("quick() takes no arguments, status and a lone --version/-V, with --root anywhere", () => {
  assertEquals(
    [[], ["status"], ["--root", "/t", "status"], ["status", "-r", "/t"], ["--root=/t", "status"]]
      .map(quick),
    [
      { cmd: "status" },
      { cmd: "status", root: undefined },
      { cmd: "status", root: "/t" },
      { cmd: "status", root: "/t" },
      { cmd: "status", root: "/t" },
    ],
  );
  assertEquals([["--version"], ["-V"]].map(quick), [{ cmd: "version" }, { cmd: "version" }]);
});

Deno.test("quick() parses agent send's options wherever they stand, repeated --approve kept", () => {
  assertEquals(
    quick([
      "agent",
      "send",
      "-v",
      "coder",
      "hello",
      "--session=s1",
      "--approve",
      "fs.stat",
      "--root",
      "/t",
      "world",
      "--approve",
      "fs.read",
      "--json",
      "--scope",
      "temp",
      "--cwd",
      "/workspace",
      "--id",
      "m-1",
    ]),
    {
      cmd: "send",
      root: "/t",
      agent: "coder",
      words: ["hello", "world"],
      options: {
        approve: ["fs.stat", "fs.read"],
        verbose: true,
        session: "s1",
        json: true,
        scope: "temp",
        cwd: "/workspace",
        id: "m-1",
      },
    },
  );
  assertEquals(quick(["agent", "send", "coder"]), {
    cmd: "send",
    root: undefined,
    agent: "coder",
    words: [],
    options: { approve: [] },
  });
});

Deno.test("quick() leaves help, unknown or combined flags, --, - and dashed values to commander", () => {
  const full = [
    ["--help"],
    ["-h"],
    ["status", "--help"],
    ["status", "extra"],
    ["--root", "/t"],
    ["--root"],
    ["--root", "-v", "status"],
    ["--version", "status"],
    ["ls"],
    ["agent", "chat", "coder"],
    ["agent", "send"],
    ["agent", "send", "--", "coder", "hi"],
    ["agent", "send", "coder", "-"],
    ["agent", "send", "coder", "-vs", "x", "hi"],
    ["agent", "send", "coder", "-s=x", "hi"],
    ["agent", "send", "coder", "--json=1", "hi"],
    ["agent", "send", "coder", "--session"],
    ["agent", "send", "coder", "--session", "-v", "hi"],
    ["agent", "send", "coder", "-5"],
    ["agent", "send", "coder", "hi", "-V"],
    ["agent", "-v", "send", "coder", "hi"],
  ];
  assertEquals(full.map(quick), full.map(() => undefined));
});
