/**
 * README's "An ordinary user's flow", word for word: the root block run as root, the user block
 * typed into a real terminal (tmux) as a new ordinary user (setpriv), against the built single
 * file alone, in a namespace where /ctx, /usr/local/bin, /var/lib, /var/cache and /run are this
 * test's own and the checkout, deno and the network are out of reach.
 */
import { assertEquals } from "../assert.ts";
import { exists, run, Tmux } from "../fixture/mod.ts";
import { builtFile, clean, fresh, inside, NAME, readmeBlocks, start } from "./fresh.ts";

const root = Deno.uid() === 0;

/** What each line of the user block must show, found by the line's own words. */
const EXPECT: [RegExp, (lines: string[]) => boolean][] = [
  [/^ctx status$/, (l) => l.includes("root=/ctx") && l.includes("root_via=/ctx")],
  [/^ctx agent new mine$/, (l) => l.includes("agent/mine")],
  [/^ctx agent send mine "hello"$/, (l) => l.includes("hello")],
  [/^ctx agent tsh mine -- tools$/, (l) => l.includes("fs.read") && l.includes("fs.write")],
  [/^ls \/ctx\/home\//, (l) => l.some((x) => x.includes("messages.jsonl"))],
  [/^echo .* > \/ctx\/agent\/mine\.d\/system\.md$/, () => true],
  [/^ctx set agent\/mine\.d\/window 4096$/, () => true],
  [/^ctx cat agent\/mine\.d\/window$/, (l) => l.includes("4096")],
];

Deno.test({
  name:
    "README's ordinary-user flow, word for word: cortexfsd as root from the single file; a new user creates, sends to, chats with (tmux) and edits its agent and reads its sessions, without root",
  ignore: !root, // needs root: useradd, namespaces, the FUSE mount at /ctx
  async fn() {
    const [rootBlock, userBlock] = readmeBlocks("An ordinary user's flow");
    assertEquals(rootBlock, [`sudo ./${NAME} install`, "sudo cortexfsd"]);
    const dir = await Deno.makeTempDir({ prefix: "cortexfs-user-" });
    Deno.chmodSync(dir, 0o755);
    const file = `${dir}/${NAME}`;
    Deno.copyFileSync(await builtFile(), file);
    Deno.chmodSync(file, 0o755);
    Deno.mkdirSync(`${dir}/var-cache`);
    // /ctx itself must exist to be mounted on (only in our namespace); made empty if missing.
    const madeCtx = !exists("/ctx", { follow: true });
    if (madeCtx) Deno.mkdirSync("/ctx", { mode: 0o755 });
    const name = `cfs${Deno.pid}`;
    const home = `${dir}/home`;
    const add = await run([
      "useradd",
      "--no-create-home",
      "--home-dir",
      home,
      "--shell",
      "/bin/sh",
      "--user-group",
      name,
    ]);
    assertEquals(add.code, 0, add.stderr);
    let daemon: ReturnType<typeof start> | undefined;
    const sock = `${dir}/tmux/sock`;
    try {
      const uid = Number((await run(["id", "-u", name])).stdout.trim());
      const gid = Number((await run(["id", "-g", name])).stdout.trim());
      Deno.mkdirSync(home, { mode: 0o700 });
      Deno.mkdirSync(`${dir}/tmux`, { mode: 0o700 });
      for (const p of [home, `${dir}/tmux`]) Deno.chownSync(p, uid, gid);
      // The root block, as root: `sudo` is who runs it; the daemon line stays running.
      const ns = fresh({
        tmpfs: ["/usr/local/bin", "/var/lib", "/run"],
        binds: [[`${dir}/var-cache`, "/var/cache"]],
      });
      const [install, serve] = rootBlock.map((l) => l.replace(/^sudo /, ""));
      daemon = start([
        ...ns,
        ...clean("/root", { PATH: "/usr/local/bin:/usr/bin:/bin" }),
        "sh",
        "-c",
        `cd '${dir}' && ${install} >/dev/null && exec ${serve}`,
      ]);
      await daemon.waitFor("cortexfsd: serving generation");
      const pid = daemon.child.pid;

      // The user's terminal: a tmux server of its own, inside the namespace, started as it.
      const userEnv = {
        PATH: "/usr/local/bin:/usr/bin:/bin",
        TERM: "xterm-256color",
        LANG: "C.UTF-8",
        USER: name,
        LOGNAME: name,
        SHELL: "/bin/sh",
        PS1: "$ ",
      };
      const tmuxStart = await run([
        ...inside(pid),
        "setpriv",
        `--reuid=${uid}`,
        `--regid=${gid}`,
        "--clear-groups",
        ...clean(home, userEnv),
        "sh",
        "-c",
        `cd && exec tmux -S '${sock}' -f /dev/null new-session -d -s t -x 160 -y 50 sh`,
      ]);
      assertEquals(tmuxStart.code, 0, tmuxStart.stderr);
      const t = new Tmux(sock);
      const prompt = (s: string) => t.lines(s).at(-1) === "$";
      await t.wait(prompt, "the shell prompt");
      for (const line of userBlock) {
        // A clean screen per line (tmux's own reset, nothing typed), then the line as written.
        await t.run("send-keys", "-R", "-t", "t");
        await t.run("clear-history", "-t", "t");
        await t.run("send-keys", "-t", "t", "-l", line);
        await t.run("send-keys", "-t", "t", "Enter");
        if (/^ctx agent chat mine$/.test(line)) {
          await t.wait((s) => t.lines(s).at(-1) === "mine>", "the chat prompt");
          await t.run("send-keys", "-t", "t", "-l", "how are you");
          await t.run("send-keys", "-t", "t", "Enter");
          const s = await t.wait(
            (s) => t.lines(s).includes("how are you") && t.lines(s).at(-1) === "mine>",
            "the chat's answer and its next prompt",
          );
          assertEquals(t.lines(s).filter((l) => l === "how are you").length, 1, s);
          await t.run("send-keys", "-t", "t", "C-c");
          await t.wait(prompt, "the shell prompt after the chat");
          continue;
        }
        const want = EXPECT.find(([re]) => re.test(line));
        if (!want) throw new Error(`README line without an expectation here: ${line}`);
        const s = await t.wait((s) => prompt(s) && want[1](t.lines(s)), `the output of: ${line}`)
          .catch((e) => {
            throw new Error(`${(e as Error).message}\ncortexfsd's log:\n${daemon?.log()}`);
          });
        const bad = t.lines(s).filter((l) => /ctx: E[A-Z]+|denied|not permitted/.test(l));
        assertEquals(bad, [], s);
      }
      // What the user did is there, done as that user: its agent, its session, its control.
      const asRoot = (cmd: string) => run([...inside(pid), "sh", "-c", cmd]);
      const seen = await asRoot(
        `stat -c '%u %a' /ctx/agent/mine.d /ctx/home/${uid}/agent/mine/session/default; ` +
          "cat /ctx/agent/mine.d/system.md /ctx/agent/mine.d/window; " +
          `grep -c '"role":"user"' /ctx/home/${uid}/agent/mine/session/default/messages.jsonl`,
      );
      assertEquals(seen.stdout.split("\n"), [
        `${uid} 755`,
        `${uid} 700`,
        "Answer in one line.",
        "4096",
        "2", // "hello" (send) and "how are you" (chat)
        "",
      ], seen.stderr);
    } finally {
      await run(["tmux", "-S", sock, "kill-server"]);
      if (daemon) assertEquals(await daemon.stop(), 0, daemon.log());
      await run(["userdel", name]);
      if (madeCtx) Deno.removeSync("/ctx");
      await Deno.remove(dir, { recursive: true });
    }
  },
});
