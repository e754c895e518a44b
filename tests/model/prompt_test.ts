/** The prompt runtime end to end: what a model-backed run sends is rendered from the agent's controls and files. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { RUNTIME_CONTRACT } from "../../src/abi/prompt.ts";
import { ctx, history } from "../fixture/mod.ts";
import { fixture, OpenAIServer } from "./openai_server.ts";
import { end, send, world } from "./world.ts";

function systemOf(server: OpenAIServer, n: number): string {
  const m = server.requests[n].body.messages?.[0];
  assertEquals(m?.role, "system");
  return String(m?.content);
}

Deno.test("prompt: editing system.md changes the system message the model receives; the contract is always in it", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"), fixture("plain"));
  const w = await world(server);
  try {
    replaceFile(`${w.f.root}/agent/m.d/system.md`, "You are a careful reviewer.\n");
    assertEquals((await send(w, "one")).code, 0);
    replaceFile(`${w.f.root}/agent/m.d/system.md`, "Answer only in haiku.\n");
    assertEquals((await send(w, "two")).code, 0);
    const [a, b] = [systemOf(server, 0), systemOf(server, 1)];
    assert(a.includes("## AGENT Instructions\n\nYou are a careful reviewer.\n"), a);
    assert(!a.includes("haiku"), a);
    assert(b.includes("Answer only in haiku."), b);
    for (const s of [a, b]) {
      assert(s.startsWith("# CortexFS Agent System Prompt\n"), s);
      assert(s.includes(`## Runtime Contract\n\n${RUNTIME_CONTRACT}\n`), s);
      assert(s.includes("Agent: m\n"), s);
    }
  } finally {
    await end(w, server);
  }
});

Deno.test("prompt: prompt.template.md is the template ({{vars}} substituted once, unknown ones kept); a template without the contract gets it appended", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"));
  const w = await world(server);
  try {
    replaceFile(`${w.f.root}/agent/m.d/system.md`, "Be brief. {{agent}} stays literal here.\n");
    replaceFile(
      `${w.f.root}/agent/m.d/prompt.template.md`,
      "Agent {{agent}} on {{model}} in {{cwd}}, session {{session}}.\n{{agent_instructions}}\n{{nope}}\n",
    );
    assertEquals((await send(w, "hi")).code, 0);
    assertEquals(
      systemOf(server, 0),
      "Agent m on fixture/chat in /workspace, session default.\n" +
        "Be brief. {{agent}} stays literal here.\n{{nope}}\n\n" +
        `## Runtime Contract\n\n${RUNTIME_CONTRACT}\n`,
    );
  } finally {
    await end(w, server);
  }
});

Deno.test("prompt: AGENTS.md of the agent home and of the workspace from its root down to the cwd reach {{rules}} in that order; a symlinked or FIFO AGENTS.md is never read; snapshots are written", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"));
  const w = await world(server, {
    prepare(f, ws) {
      const home = `${f.root}/home/0/agent/m`;
      Deno.mkdirSync(`${home}/.agents/skills/review`, { recursive: true });
      Deno.writeTextFileSync(`${home}/AGENTS.md`, "Global rule: be kind.\n");
      Deno.writeTextFileSync(
        `${home}/.agents/skills/review/SKILL.md`,
        "---\nname: review\ndescription: Review a patch for bugs.\n---\nThe body is not inlined.\n",
      );
      Deno.writeTextFileSync(`${ws}/AGENTS.md`, "Project rule: run the tests.\n");
      Deno.mkdirSync(`${ws}/sub/deeper`, { recursive: true });
      Deno.writeTextFileSync(`${f.dir}/secret.txt`, "TOP-SECRET-HOST-FILE\n");
      Deno.symlinkSync(`${f.dir}/secret.txt`, `${ws}/sub/AGENTS.md`);
      new Deno.Command("mkfifo", { args: [`${ws}/sub/deeper/AGENTS.md`] }).outputSync();
      Deno.mkdirSync(`${ws}/sub/deeper/.agents/skills/lint`, { recursive: true });
      Deno.writeTextFileSync(`${ws}/sub/deeper/.agents/skills/lint/SKILL.md`, "no front matter\n");
    },
  });
  try {
    const out = await send(w, "hi", ["--cwd", "/workspace/sub/deeper"]);
    assertEquals(out.code, 0, out.stderr);
    const s = systemOf(server, 0);
    const rules = "### /home/agent/AGENTS.md\n\nGlobal rule: be kind.\n\n" +
      "### /workspace/AGENTS.md\n\nProject rule: run the tests.";
    assert(s.includes(`## Rules\n\n${rules}\n`), s);
    assert(!s.includes("TOP-SECRET"), s);
    assert(
      s.includes(
        "## Skills\n\n- review: Review a patch for bugs. (/home/agent/.agents/skills/review/SKILL.md)\n" +
          "- lint:  (/workspace/sub/deeper/.agents/skills/lint/SKILL.md)\n",
      ),
      s,
    );
    assert(!s.includes("The body is not inlined"), s);
    const dir = history(w.f, "m").dir;
    assertEquals(Deno.readTextFileSync(`${dir}/AGENTS.md`), `${rules}\n`);
    assertEquals(
      Deno.readTextFileSync(`${dir}/SKILLS.md`),
      "- review: Review a patch for bugs. (/home/agent/.agents/skills/review/SKILL.md)\n" +
        "- lint:  (/workspace/sub/deeper/.agents/skills/lint/SKILL.md)\n",
    );
  } finally {
    await end(w, server);
  }
});

Deno.test("prompt: tsh load/pin state reaches the tool injection block of the next run", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"), fixture("plain"));
  const w = await world(server);
  try {
    assertEquals((await send(w, "before")).code, 0);
    assert(
      systemOf(server, 0).includes("## Tool Injection\n\n(no tools loaded"),
      systemOf(server, 0),
    );
    const load = await ctx(w.f, ["agent", "tsh", "m", "pin", "fs.read"], { cwd: w.ws });
    assertEquals(load.code, 0, load.stderr);
    assertEquals((await send(w, "after")).code, 0);
    const s = systemOf(server, 1);
    assert(/## Tool Injection\n\nLoaded tools[^\n]*\n- fs\.read \(pinned\): \S/.test(s), s);
  } finally {
    await end(w, server);
  }
});

Deno.test("ctx agent prompt prints the rendered prompt (the real renderer) and per-category token estimates", async () => {
  const server = new OpenAIServer();
  const w = await world(server, {
    prepare(_f, ws) {
      Deno.writeTextFileSync(`${ws}/AGENTS.md`, "Project rule: run the tests.\n");
    },
  });
  try {
    replaceFile(`${w.f.root}/agent/m.d/system.md`, "You are a careful reviewer.\n");
    const out = await ctx(w.f, ["agent", "prompt", "m"], { cwd: w.ws });
    assertEquals(out.code, 0, out.stderr);
    assert(out.stdout.startsWith("# CortexFS Agent System Prompt\n"), out.stdout);
    assert(out.stdout.includes("You are a careful reviewer."), out.stdout);
    assert(out.stdout.includes("### /workspace/AGENTS.md\n\nProject rule: run the tests."));
    assert(out.stdout.includes(RUNTIME_CONTRACT), out.stdout);
    const cats = out.stderr.split("\n").filter((l) => /^\S+\t\d+$/.test(l)).map((l) =>
      l.split("\t")[0]
    );
    assertEquals(cats, ["system", "agents_md", "skills", "tools", "history", "total"], out.stderr);
    const est = (o: { stderr: string }, k: string) =>
      Number(o.stderr.split("\n").find((l) => l.startsWith(`${k}\t`))?.split("\t")[1]);
    assertEquals(est(out, "history"), 0);
    assertEquals(server.requests.length, 0);
    // After one exchange the session's history is estimated with the same admission a run uses.
    server.push(fixture("plain"));
    assertEquals((await send(w, "x".repeat(400))).code, 0);
    const after = await ctx(w.f, ["agent", "prompt", "m", "--session", "default"], { cwd: w.ws });
    assertEquals(after.code, 0, after.stderr);
    assert(est(after, "history") >= 100, after.stderr);
    assertEquals(est(after, "total") > est(out, "total"), true);
    // Exactly what the run sent, but for the clock line.
    const sent = systemOf(server, 0).replace(/^Time: .*$/m, "");
    assertEquals(after.stdout.replace(/^Time: .*$/m, ""), sent);
  } finally {
    await end(w, server);
  }
});
