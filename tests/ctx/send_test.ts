/** `ctx agent send` to an agent that is not right (a bad control, none at all, not the peer's): every refusal in the words the full agent check has always used, whether a daemon serves the tree or not. */
import { assertEquals } from "../assert.ts";
import {
  cleanup,
  ctxOn,
  ctxRun,
  type Daemon,
  makeTree,
  nobodyDenoDir,
  startDaemon,
} from "../fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const root = Deno.uid() === 0;

/** Agents with one thing wrong each, written straight into the backing tree (the mount refuses). */
function breakAgents(tree: { root: string }): void {
  const fault: Record<string, (dir: string) => void> = {
    badwin: (d) => Deno.writeTextFileSync(`${d}/window`, "01\n"),
    baduid: (d) => Deno.writeTextFileSync(`${d}/uid`, "01\n"),
    nolabel: (d) => Deno.removeSync(`${d}/label`),
    badenv: (d) => Deno.writeTextFileSync(`${d}/env`, "not an env line\n"),
  };
  for (const [name, spoil] of Object.entries(fault)) {
    createAgent(tree.root, name, { uid: 0, gid: 0 });
    spoil(`${tree.root}/agent/${name}.d`);
  }
}

Deno.test({
  name: "ctx agent send to an agent with a bad or missing control names it and exits by its errno",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      breakAgents(tree);
      d = await startDaemon(tree);
      const m = tree.mount;
      const send = async (args: string[], as?: number) => {
        const denoDir = as === undefined ? undefined : nobodyDenoDir(as);
        const r = await ctxOn(tree, ["agent", "send", ...args], { as, denoDir, cwd: tree.dir });
        return [r.code, r.stdout, r.stderr];
      };
      const leadingZero = (agent: string, c: string) =>
        `ctx: EINVAL: ${m}/agent/${agent}.d/${c}: "${c}": "01" has a leading zero\n`;
      assertEquals(await send(["badwin", "hi"]), [2, "", leadingZero("badwin", "window")]);
      assertEquals(await send(["--json", "badwin", "hi"]), [
        2,
        "",
        leadingZero("badwin", "window"),
      ]);
      assertEquals(await send(["baduid", "hi"]), [2, "", leadingZero("baduid", "uid")]);
      assertEquals(await send(["nolabel", "hi"]), [
        1,
        "",
        `ctx: ENOENT: ${m}/agent/nolabel.d/label: required control "label" is missing\n`,
      ]);
      // `env` is secret: ctx never reads it; the daemon's own check refuses the request.
      assertEquals(await send(["badenv", "hi"]), [
        2,
        "",
        `ctx: EINVAL: agent/badenv: "env": line 1 "not an env line" is not KEY=VALUE\n`,
      ]);
      assertEquals(await send(["nope", "hi"]), [
        1,
        "",
        `ctx: ENOENT: agent/nope.d: no agent "nope"\n`,
      ]);
      assertEquals(await send(["bad..name/x", "hi"]), [
        2,
        "",
        `ctx: EINVAL: agent/bad..name/x: agent name "bad..name/x" contains "/"\n`,
      ]);
      // Another uid: the bad control is what it hears about, before the daemon's EACCES.
      assertEquals(await send(["badwin", "hi"], 1000), [2, "", leadingZero("badwin", "window")]);
      assertEquals(await send(["coder", "hi"], 1000), [
        13,
        "",
        "ctx: EACCES: agent/coder: peer uid 1000 is neither the owner (0) of agent coder nor 0\n",
      ]);
      assertEquals(await send(["coder", "hi"]), [0, "hi\n", ""]);
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test("ctx agent send on a tree no daemon serves reports a bad control before the missing daemon", async () => {
  const tree = await makeTree();
  try {
    breakAgents(tree);
    const send = async (agent: string) => {
      const r = await ctxOn({ mount: tree.root }, ["agent", "send", agent, "hi"], {
        cwd: tree.dir,
      });
      return [r.code, r.stdout, r.stderr];
    };
    assertEquals(await send("badwin"), [
      2,
      "",
      `ctx: EINVAL: ${tree.root}/agent/badwin.d/window: "window": "01" has a leading zero\n`,
    ]);
    assertEquals(await send("nope"), [1, "", `ctx: ENOENT: agent/nope.d: no agent "nope"\n`]);
    assertEquals(await send("coder"), [
      69,
      "",
      `ctx: EHOSTDOWN: agent/coder.sock: no daemon is serving this tree (${tree.root} is not a ` +
      "live mount, no socket): start it with `sudo cortexfsd` (in a checkout: `sudo tools/deno " +
      "task dev`), then use its mount\n",
    ]);
  } finally {
    await cleanup(tree);
  }
});

Deno.test("ctx agent send whose connection closes before any answer says so and exits 69 (EHOSTDOWN), never silently", async () => {
  const tree = await makeTree();
  createAgent(tree.root, "gone", { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0 });
  // A server that takes the request and hangs up without a frame (an instance that died).
  const listener = Deno.listen({ transport: "unix", path: `${tree.root}/agent/gone.sock` });
  const served = (async () => {
    const c = await listener.accept();
    await c.read(new Uint8Array(4096));
    c.close();
  })();
  try {
    const r = await ctxRun(["agent", "send", "gone", "hi"], { env: { CTX_ROOT: tree.root } });
    await served;
    assertEquals([r.code, r.stdout], [69, ""]);
    assertEquals(
      r.stderr.trim(),
      "ctx: EHOSTDOWN: agent/gone: the connection closed before the request ended; the daemon's log (agent/gone.d/log) says why",
    );
  } finally {
    listener.close();
    await cleanup(tree);
  }
});

Deno.test({
  name:
    "ctx agent send without --session continues the session index/current names (as a uid other than root too); --session names one",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      createAgent(tree.root, "mine", { uid: 65534, gid: 65534 });
      d = await startDaemon(tree);
      const send = (args: string[]) =>
        ctxOn(tree, ["agent", "send", ...args], {
          as: 65534,
          denoDir: nobodyDenoDir(65534),
          cwd: "/tmp",
        });
      const texts = (session: string) =>
        Deno.readTextFileSync(
          `${tree.root}/home/65534/agent/mine/session/${session}/messages.jsonl`,
        ).trim().split("\n").map((l) => JSON.parse(l)).filter((m) => m.role === "user")
          .map((m) => m.content);
      assertEquals((await send(["mine", "one"])).code, 0);
      assertEquals((await send(["--session", "work", "mine", "two"])).code, 0);
      const r = await send(["mine", "three"]);
      assertEquals([r.code, r.stdout], [0, "three\n"]);
      assertEquals(texts("default"), ["one"]);
      assertEquals(texts("work"), ["two", "three"]);
    } finally {
      await d?.stop();
      await cleanup(tree);
    }
  },
});
