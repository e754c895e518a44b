/** Issue 25 item 1: a provider's model from the command line: root makes it and stores its key, a user lists it and talks to it, nobody else reads the key. */
import { assert, assertEquals, assertStringIncludes } from "../assert.ts";
import { EXIT } from "../../src/abi/errno.ts";
import { run, type Target, withTarget } from "../fixture/mod.ts";
import { fixture, OpenAIServer } from "../model/openai_server.ts";

const USER = 1000;
const KEY = "sk-model-new-0123456789abcdef";

/** `ctx` with the daemon's own secret store (the host's is never touched by a test). */
const ctxAt = (t: Target, secrets: string) =>
(
  args: string[],
  o: { uid?: number; stdin?: string } = {},
) => t.ctx(args, { ...o, env: { CORTEXFS_SECRETS: secrets } });

Deno.test("ctx model new (root) + provider set: a user's agent on it answers through the provider, model list says key stored, no user reads the key; a user is told the exact sudo command", async () => {
  const server = new OpenAIServer();
  server.push(fixture("plain"));
  const secrets = await Deno.makeTempDir({ prefix: "cortexfs-secrets-" });
  try {
    await withTarget(async (t) => {
      const ctx = ctxAt(t, secrets);
      const make = [
        "model",
        "new",
        "fixture/chat",
        "--driver",
        "openai-chat",
        "--base-url",
        server.baseURL,
        "--id",
        "fixture-model",
        "--limit",
        "65536",
      ];
      // An ordinary user: refused at once, with the command to run; nothing made.
      const mine = await ctx(make, { uid: USER });
      assertEquals(mine.code, EXIT.access, mine.stderr);
      assertStringIncludes(mine.stderr, `sudo ctx ${make.join(" ")}`);
      const key = await ctx(["provider", "set", "fixture"], { uid: USER, stdin: KEY });
      assertEquals(key.code, EXIT.access, key.stderr);
      assertStringIncludes(key.stderr, "sudo ctx provider set fixture");
      assertEquals([...Deno.readDirSync(secrets)], []);
      assertEquals((await ctx(["cat", "model/fixture/chat.d/driver"])).code !== 0, true);

      // Bad input: a clear error, nothing made.
      const bads: [string[], string][] = [
        [["--driver", "openai-chat"], "--base-url"],
        [["--driver", "telepathy", "--base-url", server.baseURL], "telepathy"],
        [["--driver", "openai-chat", "--base-url", "ftp://x"], "base_url"],
        [["--driver", "openai-chat", "--base-url", server.baseURL, "--limit", "0"], "limit"],
        [
          ["--driver", "openai-chat", "--base-url", server.baseURL, "--fallback", "no/such"],
          "no/such",
        ],
      ];
      for (const [bad, why] of bads) {
        const r = await ctx(["model", "new", "fixture/bad", ...bad]);
        assert(r.code !== 0, `${bad.join(" ")}: ${r.stdout}`);
        assertStringIncludes(r.stderr, why);
        assertEquals((await ctx(["ls", "model"])).stdout.includes("fixture"), false, bad.join(" "));
      }

      // An alias is no provider: refused, its target untouched.
      const before = Deno.statSync(`${t.tree.root}/model/debug/echo`).mode;
      const alias = await ctx(["model", "new", "main/x", "--driver", "openai-responses"]);
      assertEquals(alias.code, 2, alias.stderr);
      assertStringIncludes(alias.stderr, "not a provider directory");
      assertEquals(Deno.statSync(`${t.tree.root}/model/debug/echo`).mode, before);

      // Root makes it and stores the key.
      const made = await ctx(make);
      assertEquals(made.code, 0, made.stderr);
      assertStringIncludes(made.stdout, "model/fixture/chat");
      const again = await ctx(make);
      assertEquals(again.code, 1, "a second make is EEXIST");
      assertStringIncludes(again.stderr, "EEXIST");
      const stored = await ctx(["provider", "set", "fixture"], { stdin: `${KEY}\n` });
      assertEquals(stored.code, 0, stored.stderr);

      // The user: list, a new agent on the model, one send.
      const list = await ctx(["model", "list"], { uid: USER });
      assertEquals(list.code, 0, list.stderr);
      const row = list.stdout.split("\n").find((l) => l.startsWith("fixture/chat "));
      assert(row, list.stdout);
      assertEquals(row.split(/\s+/), [
        "fixture/chat",
        "openai-chat",
        server.baseURL,
        "65536",
        "stored",
      ]);
      const echo = list.stdout.split("\n").find((l) => l.startsWith("debug/echo "));
      assertEquals(echo?.split(/\s+/), ["debug/echo", "debug", "-", "131072", "-"]);
      const agent = await ctx(["agent", "new", "mine", "--model", "fixture/chat"], { uid: USER });
      assertEquals(agent.code, 0, agent.stderr);
      const sent = await ctx(["agent", "send", "mine", "say hello"], { uid: USER });
      assertEquals([sent.code, sent.stdout.trim()], [0, "Hello, world."], sent.stderr);
      assertEquals(server.requests.length, 1);
      assertEquals(server.requests[0].authorization, `Bearer ${KEY}`);
      assertEquals(server.requests[0].body.model, "fixture-model");

      // The key: in the store only, which no user can list or read.
      for (const uid of [USER, 65534]) {
        const r = await run(["grep", "-rl", KEY, secrets, t.tree.dir], { uid });
        assertEquals(r.stdout, "", `uid ${uid} found the key in ${r.stdout}`);
      }
      await t.bystander();
    }, { wrap: ["env", `CORTEXFS_SECRETS=${secrets}`] });
  } finally {
    await server.close();
    await Deno.remove(secrets, { recursive: true });
  }
});
