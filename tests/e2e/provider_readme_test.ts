/**
 * Issue 25 must-show: README's provider paragraph, word for word. Root runs its `model new` and
 * `provider set` lines; an ordinary user types the rest into a real terminal (tmux). The local
 * model's server is the fixture one on 127.0.0.1:11434, as the README says, in a network namespace
 * of this test's own (with cortexfsd, whose instances call it): no other test or service shares
 * that port.
 */
import { assert, assertEquals } from "../assert.ts";
import {
  asUid,
  BOUND_MS,
  DENO,
  nobodyDenoDir,
  REPO,
  run,
  Tmux,
  until,
  withTarget,
} from "../fixture/mod.ts";
import { readmeBlocks } from "../packaging/fresh.ts";

const USER = 1000;
const SECTION = "Run it from a checkout (embedded default: no account, no network)";

/** The fixture server in a new network namespace (lo up), on the README's port; `ready` read. */
async function server() {
  const child = new Deno.Command("unshare", {
    args: [
      "--net",
      "--",
      "sh",
      "-c",
      'ip link set lo up && exec "$0" run -A "$1" 11434 plain 1',
      DENO,
      `${REPO}/tests/model/serve.ts`,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  const line = async () => {
    while (!out.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error(`the fixture server ended: ${out}`);
      out += value;
    }
    const [first] = out.split("\n", 1);
    out = out.slice(first.length + 1);
    return first;
  };
  assertEquals(await line(), "ready");
  const w = child.stdin.getWriter();
  return {
    /** nsenter's option entering its network namespace. */
    net: `--net=/proc/${child.pid}/ns/net`,
    /** Sends the held stream's rest. */
    go: () => w.write(new TextEncoder().encode("go\n")),
    /** Ends it; the requests it saw. */
    async stop(): Promise<{ authorization: string | null; body: { model?: string } }[]> {
      await w.close().catch(() => {});
      try {
        return JSON.parse(await line());
      } finally {
        await lines.cancel().catch(() => {});
        await child.status;
      }
    },
    kill() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
    },
  };
}

Deno.test("README's provider paragraph, word for word: root makes the models and stores a key; a user (tmux) lists them (key: stored), makes an agent on local/llama and its answer streams from 127.0.0.1:11434; the key is nowhere the user can read", async () => {
  const [block] = readmeBlocks(SECTION).filter((b) => b.some((l) => / model new local\//.test(l)));
  assert(block, "README's provider block");
  const byRoot = block.filter((l) => / (model new|provider set) /.test(l));
  const byUser = block.filter((l) => !byRoot.includes(l));
  const words = (l: string) => l.replace(/^tools\/deno run -A cli\/ctx\.ts /, "").split(" ")[0];
  assertEquals(byRoot.map(words), ["model", "model", "model", "provider"]);
  assertEquals(byUser.map((l) => l.split(" ").slice(4, 6).join(" ")), [
    "model list",
    "agent new",
    "agent send",
  ]);
  const KEY = `sk-readme-${crypto.randomUUID()}`;
  const secrets = await Deno.makeTempDir({ prefix: "cortexfs-secrets-" });
  const denoDir = nobodyDenoDir(USER);
  const srv = await server();
  let seen: Awaited<ReturnType<typeof srv.stop>> | undefined;
  try {
    await withTarget(async (t) => {
      // The checkout as the user sees it, in a directory of its own (the agent's workspace, where
      // `openai.key` is read from): every top-level entry a link to the checkout's.
      const w = `${t.tree.dir}/w`;
      Deno.mkdirSync(w);
      for (const e of Deno.readDirSync(REPO)) {
        if (!e.name.startsWith(".")) Deno.symlinkSync(`${REPO}/${e.name}`, `${w}/${e.name}`);
      }
      Deno.writeTextFileSync(`${w}/openai.key`, `${KEY}\n`, { mode: 0o600 });
      const env = { CTX_ROOT: t.tree.mount, CORTEXFS_SECRETS: secrets };
      for (const line of byRoot) {
        const r = await run(["sh", "-c", line], { cwd: w, env, ms: BOUND_MS });
        assertEquals(r.code, 0, `${line}: ${r.stdout}${r.stderr}`);
      }
      Deno.removeSync(`${w}/openai.key`); // stored now: the user's copy goes
      Deno.chownSync(w, USER, USER);

      // The user's terminal: its own tmux server, started as it, in `w`.
      const sock = `${t.tree.dir}/tmux/sock`;
      Deno.mkdirSync(`${t.tree.dir}/tmux`, { mode: 0o700 });
      Deno.chownSync(`${t.tree.dir}/tmux`, USER, USER);
      const userEnv = [
        `PATH=/usr/bin:/bin`,
        `HOME=${denoDir}`,
        `DENO_DIR=${denoDir}`,
        `CTX_ROOT=${t.tree.mount}`,
        `CORTEXFS_SECRETS=${secrets}`, // the host's store, as the daemon's: this test's own
        "TERM=xterm-256color",
        "LANG=C.UTF-8",
        "PS1=$ ",
      ];
      const tmux = await run(
        asUid([
          "env",
          "-i",
          ...userEnv,
          "sh",
          "-c",
          `cd '${w}' && exec tmux -S '${sock}' -f /dev/null new-session -d -s t -x 200 -y 50 sh`,
        ], USER),
      );
      assertEquals(tmux.code, 0, tmux.stderr);
      const tm = new Tmux(sock);
      try {
        const screen = async (pred: (lines: string[]) => boolean, what: string) => {
          let s = "";
          await until(async () => pred(tm.lines(s = await tm.screen())), what, BOUND_MS)
            .catch((e) => {
              throw new Error(`${(e as Error).message}; screen:\n${s}`);
            });
          return tm.lines(s);
        };
        const prompt = (l: string[]) => l.at(-1) === "$";
        await screen(prompt, "the shell prompt");
        const type = async (line: string) => {
          await tm.run("send-keys", "-R", "-t", "t");
          await tm.run("clear-history", "-t", "t");
          await tm.run("send-keys", "-t", "t", "-l", line);
          await tm.run("send-keys", "-t", "t", "Enter");
        };
        const [list, agent, send] = byUser;
        await type(list);
        const rows = await screen((l) => prompt(l) && l.length > 2, "model list");
        const row = (name: string) =>
          rows.find((r) => r.startsWith(`${name} `))?.split(/\s+/) ?? rows;
        assertEquals(row("local/llama").slice(0, 3), [
          "local/llama",
          "openai-chat",
          "http://127.0.0.1:11434/v1",
        ]);
        assertEquals(row("openai/gpt-4o-mini").at(-1), "stored");
        assertEquals(row("local/llama").at(-1), "none");
        await type(agent);
        await screen((l) => prompt(l) && l.some((x) => x.includes("agent/mine")), agent);
        await type(send);
        // The first chunk is on screen while the server holds the rest: it streams.
        const part = await screen((l) => l.some((x) => x.includes("Hello")), "the first chunk");
        assertEquals(part.some((x) => x.includes(", world.")), false, part.join("\n"));
        await srv.go();
        const done = await screen(
          (l) => prompt(l) && l.some((x) => x.includes("Hello, world.")),
          "the whole answer",
        );
        assertEquals(done.filter((x) => /ctx: E[A-Z]+/.test(x)), [], done.join("\n"));

        // The key: nowhere the user reads, neither in files (the mount, the tree, the secrets,
        // the checkout's .dev, /etc/cortexfs, its directory) nor in any command line or
        // environment it may read, nor in its terminal. The pattern comes on stdin.
        const places = [t.tree.dir, secrets, `${REPO}/.dev`, "/etc/cortexfs"].filter((p) => {
          try {
            return Deno.statSync(p).isDirectory;
          } catch {
            return false;
          }
        });
        const files = await run(["grep", "-rlsF", "-D", "skip", "-f", "-", ...places], {
          uid: USER,
          stdin: KEY,
          ms: BOUND_MS,
        });
        assertEquals(files.stdout, "", "files holding the key");
        const procs = await run(
          ["sh", "-c", "grep -lsF -f - /proc/[0-9]*/cmdline /proc/[0-9]*/environ"],
          { uid: USER, stdin: KEY, ms: BOUND_MS },
        );
        assertEquals(procs.stdout, "", "processes showing the key");
        assertEquals(
          (await tm.run("capture-pane", "-p", "-S", "-", "-t", "t")).out.includes(KEY),
          false,
        );
        await t.bystander();
      } finally {
        await tm.run("kill-server");
      }
    }, { wrap: ["nsenter", srv.net, "--", "env", `CORTEXFS_SECRETS=${secrets}`] });
    seen = await srv.stop();
  } finally {
    srv.kill();
    await Deno.remove(secrets, { recursive: true }).catch(() => {});
    await Deno.remove(denoDir, { recursive: true }).catch(() => {});
  }
  // The local model got the one request, under the README's native id, and no key.
  assertEquals(seen?.map((r) => [r.body.model, r.authorization]), [["llama3.1:8b", null]]);
});
