/**
 * Issue 25 item 2: `ctx agent chat` after `su - user` in a terminal root owns (the pty stays
 * root's, 0600, so the user's process cannot reopen it): lines are sent and answered.
 */
import { assertEquals } from "../assert.ts";
import { CONFIG, CTX, DENO, nobodyDenoDir, run, Tmux, withTarget } from "../fixture/mod.ts";

Deno.test("ctx agent chat after su - user in root's terminal: each line is answered, Ctrl+C leaves", async () => {
  const name = `cfschat${Deno.pid}`;
  const add = await run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name]);
  assertEquals(add.code, 0, add.stderr);
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-su-" });
  const sock = `${dir}/tmux.sock`;
  let denoDir: string | undefined;
  try {
    const uid = Number((await run(["id", "-u", name])).stdout.trim());
    denoDir = nobodyDenoDir(uid);
    await withTarget(async (t) => {
      const made = await t.ctx(["agent", "new", "mine"], {
        uid,
        env: { DENO_DIR: denoDir! },
      });
      assertEquals(made.code, 0, made.stderr);
      // root's terminal: a tmux server root starts, its pty root's.
      const started = await run([
        "tmux",
        "-S",
        sock,
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "160",
        "-y",
        "40",
        "env",
        "PS1=# ",
        "bash",
        "--norc",
        "--noprofile",
      ]);
      assertEquals(started.code, 0, started.stderr);
      const tm = new Tmux(sock);
      const type = async (line: string) => {
        await tm.run("send-keys", "-t", "t", "-l", line);
        await tm.run("send-keys", "-t", "t", "Enter");
      };
      const last = (s: string) => tm.lines(s).at(-1) ?? "";
      await tm.wait((s) => last(s) === "#", "root's prompt");
      await type(`su - ${name}`);
      await tm.wait((s) => last(s).endsWith("$"), "the user's login shell");
      await type(
        `HOME=${denoDir} DENO_DIR=${denoDir} CTX_ROOT=${t.tree.mount} NO_COLOR=1 ` +
          `${DENO} run -A --quiet --config ${CONFIG} ${CTX} agent chat mine`,
      );
      await tm.wait((s) => last(s) === "mine>", "the chat prompt");
      for (const line of ["hello there", "and again"]) {
        await type(line);
        // debug/echo answers with the line itself, on a line of its own.
        await tm.wait((s) => tm.lines(s).includes(line), `the answer to ${line}`);
      }
      await tm.run("send-keys", "-t", "t", "C-c");
      await tm.wait((s) => last(s).endsWith("$"), "the shell after Ctrl+C");
      await t.bystander();
    });
  } finally {
    await run(["tmux", "-S", sock, "kill-server"]);
    // Only this test's processes run as this new user (a chat the test left hanging, say).
    await run(["pkill", "-KILL", "-u", name]);
    await run(["userdel", "--remove", name]);
    if (denoDir) await Deno.remove(denoDir, { recursive: true }).catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
