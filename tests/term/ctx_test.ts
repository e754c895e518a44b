/** `ctx terminal ...`, `ctx agent watch|attach` and `agent.sh --watch|--attach` on a real tree: ctxterm -> bwrap -> interactive tsh. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { closePane, CTX_ARGV, makeTree, pane, REPO, type Tmux, until } from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

async function ctx(env: Record<string, string>, ...args: string[]) {
  const o = await new Deno.Command(CTX_ARGV[0], {
    args: [...CTX_ARGV.slice(1), ...args],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout), err: dec.decode(o.stderr) };
}

function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

Deno.test("ctx terminal create starts tsh in the agent sandbox; attach, watch, agent.sh, list, status, replay", async () => {
  const f = await makeTree();
  const ws = `${f.dir}/project`;
  Deno.mkdirSync(`${ws}/.git`, { recursive: true });
  createAgent(f.root, "shell", { uid: 0, gid: 0 });
  // A `ctx` on PATH for agent.sh (it resolves ctx and execs `ctx agent ...`, nothing else).
  const bin = `${f.dir}/bin`;
  Deno.mkdirSync(bin);
  Deno.writeTextFileSync(`${bin}/ctx`, `#!/bin/sh\nexec ${CTX_ARGV.join(" ")} "$@"\n`, {
    mode: 0o755,
  });
  const env = {
    CTX_ROOT: f.root,
    XDG_RUNTIME_DIR: `${f.dir}/xdg`,
    PATH: `${bin}:/usr/bin:/bin`,
    HOME: f.dir,
  };
  const panes: Tmux[] = [];
  let pid = 0;
  try {
    const c = await ctx(env, "terminal", "create", "shell", "--cwd", ws);
    assertEquals(c.code, 0, c.err);
    const [id, dir, socket] = c.out.trim().split("\t");
    const sessionDir = `${f.root}/home/0/agent/shell/session/default`;
    assertEquals(dir, `${sessionDir}/terminal/${id}`);
    assertEquals(socket, `${f.dir}/xdg/cortexfs/terminal/shell/default/main.sock`);
    assertEquals(Deno.readLinkSync(`${sessionDir}/terminal/main.sock`), socket);
    const meta = JSON.parse(Deno.readTextFileSync(`${dir}/meta.json`));
    pid = meta.pid;
    assertEquals(
      [meta.id, meta.agent, meta.session, meta.owner, meta.cwd, meta.command, meta.state],
      [id, "shell", "default", "0", "/workspace", ["tsh"], "running"],
    );
    assertEquals(Deno.readTextFileSync(`${dir}/state`), "running\n");

    // A person attaches with ctx (socket found through the ABI alias) and types.
    const tmuxEnv = ["env", ...Object.entries(env).map(([k, v]) => `${k}=${v}`)];
    const a = await pane(f.dir, "a", [...tmuxEnv, ...CTX_ARGV, "agent", "attach", "shell"]);
    panes.push(a);
    await a.wait((s) => s.includes("tsh>"), "the tsh prompt");
    await a.run("send-keys", "-t", "t", "help", "Enter");
    await a.wait((s) => s.includes("help [TOOL]"), "tsh's help");
    // agent.sh --watch maps to `ctx agent watch shell --session default`: the same screen.
    const w = await pane(f.dir, "w", [
      ...tmuxEnv,
      "/bin/sh",
      `${REPO}/cli/agent.sh`,
      "--watch",
      "shell",
    ]);
    panes.push(w);
    await w.wait((s) => s.includes("help [TOOL]") && s.includes("tsh>"), "the watcher's screen");
    // History lands in the agent home, not the workspace.
    assertEquals(
      Deno.readTextFileSync(`${f.root}/home/0/agent/shell/.tsh_history`),
      "help\n",
    );
    assertEquals([...Deno.readDirSync(ws)].map((e) => e.name), [".git"]);

    const l = await ctx(env, "terminal", "list", "shell");
    assertEquals(l.code, 0, l.err);
    assert(new RegExp(`^${id}\\s+shell\\s+default\\s+running\\s+yes`, "m").test(l.out), l.out);
    const st = await ctx(env, "terminal", "status", id, "--json");
    const info = JSON.parse(st.out);
    assertEquals([info.state, info.live, info.torn], ["running", true, false]);

    // Without the alias the user runtime socket is the next place looked.
    Deno.removeSync(`${sessionDir}/terminal/main.sock`);
    const w2 = await pane(f.dir, "w2", [...tmuxEnv, ...CTX_ARGV, "terminal", "watch", id]);
    panes.push(w2);
    await w2.wait((s) => s.includes("help [TOOL]"), "watch through the runtime path");

    // The shell exits: the terminal ends, recorded; the clients hear it.
    await a.run("send-keys", "-t", "t", "exit", "Enter");
    await a.wait((s) => s.includes("[client exit 0]"), "the attacher's end");
    await until(() => !alive(pid), "ctxterm to end");
    assertEquals(Deno.readTextFileSync(`${dir}/state`), "exited\n");
    const after = await ctx(env, "agent", "attach", "shell");
    assertEquals(after.code, 69, after.err);
    assert(after.err.includes("no live terminal socket"), after.err);
    const r = await ctx(env, "terminal", "replay", id, "--no-wait");
    assertEquals(r.code, 0, r.err);
    assert(r.out.includes("help [TOOL]"), r.out);
  } finally {
    for (const p of panes) await closePane(p);
    if (pid && alive(pid)) Deno.kill(pid, "SIGTERM");
    await until(() => !pid || !alive(pid), "ctxterm to end");
    await Deno.remove(f.dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("ctx agent watch without a live terminal is a socket-availability error (exit 69)", async () => {
  const f = await makeTree();
  try {
    createAgent(f.root, "idle", { uid: 0, gid: 0 });
    const r = await ctx(
      { CTX_ROOT: f.root, XDG_RUNTIME_DIR: `${f.dir}/xdg`, PATH: "/usr/bin:/bin" },
      "agent",
      "watch",
      "idle",
      "--session",
      "s1",
    );
    assertEquals(r.code, 69);
    assertEquals(
      r.err.trim(),
      `ctx: EHOSTDOWN: ${f.root}/home/0/agent/idle/session/s1/terminal/main.sock: no live terminal socket for agent "idle" session "s1" (tried ${f.root}/home/0/agent/idle/session/s1/terminal/main.sock, ${f.dir}/xdg/cortexfs/terminal/idle/s1/main.sock): start one with \`ctx terminal create idle --session s1\``,
    );
  } finally {
    await Deno.remove(f.dir, { recursive: true }).catch(() => {});
  }
});
