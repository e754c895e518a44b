/** A first run as a user meets it: ctx finds the tree without CTX_ROOT, and says what to do when there is none or its daemon is gone. */
import { assert, assertEquals, assertStringIncludes } from "../assert.ts";
import { EXIT } from "../../src/abi/errno.ts";
import {
  cleanup,
  CONFIG,
  CORTEXFSD,
  ctx,
  type Daemon,
  DENO,
  makeTree,
  nobodyDenoDir,
  REPO,
  run,
  startDaemon,
  startRuntimeDaemon,
  until,
} from "../fixture/mod.ts";
import { update } from "../../src/store/generation.ts";

const HINT = "start it with `sudo cortexfsd` (in a checkout: `sudo tools/deno task dev`)";

/** True when this host has a live tree at /ctx (ctx would rightly use it first). */
function systemTree(): boolean {
  try {
    Deno.statSync("/ctx/status");
    return true;
  } catch {
    return false;
  }
}

/**
 * A checkout of its own: `cli/ctx.ts` copied (ctx finds its checkout from its own path), `src`
 * and `deno.json` linked. Its dev mount is `<dir>/.dev/ctx`, as `deno task dev` would make it.
 */
async function checkout(): Promise<
  { dir: string; ctx: string; storage: string; mount: string; run: string }
> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-checkout-" });
  Deno.mkdirSync(`${dir}/cli`);
  for (const f of ["ctx.ts", "ctx_program.ts"]) {
    Deno.copyFileSync(`${REPO}/cli/${f}`, `${dir}/cli/${f}`);
  }
  Deno.symlinkSync(`${REPO}/src`, `${dir}/src`);
  Deno.symlinkSync(`${REPO}/deno.json`, `${dir}/deno.json`); // what makes it a checkout
  const dev = `${dir}/.dev`;
  Deno.mkdirSync(`${dev}/ctx`, { recursive: true });
  Deno.mkdirSync(`${dev}/run`);
  return {
    dir,
    ctx: `${dir}/cli/ctx.ts`,
    storage: `${dev}/storage`,
    mount: `${dev}/ctx`,
    run: `${dev}/run`,
  };
}

/** Runs that checkout's ctx with a clean environment (no CTX_ROOT unless given). */
function ctxOf(cli: string, args: string[], env: Record<string, string> = {}, stdin?: string) {
  return run([DENO, "run", "-A", "--quiet", `--config=${CONFIG}`, cli, ...args], {
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: "/root", NO_COLOR: "1", ...env },
    stdin,
  });
}

Deno.test({
  name:
    "without CTX_ROOT and with nothing mounted ctx says no mount was found, where it looked, how to start one (exit 69)",
  ignore: systemTree(),
  async fn() {
    const c = await checkout();
    try {
      const want = {
        code: 69,
        stdout: "",
        stderr: `ctx: no CortexFS mount found (tried /ctx, ${c.mount}): ${HINT}, ` +
          "or point CTX_ROOT at a tree\n",
      };
      assertEquals(await ctxOf(c.ctx, ["status"]), want);
      assertEquals(await ctxOf(c.ctx, ["agent", "send", "coder", "hello"]), want);
    } finally {
      await Deno.remove(c.dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "ctx finds its checkout's running dev mount without CTX_ROOT; after kill -9 it says the mount is dead and how to recover",
  ignore: systemTree(),
  async fn() {
    const c = await checkout();
    let d: Daemon | null = null;
    try {
      update(c.storage, {});
      d = await startDaemon(c, { args: ["--dev"] });
      const st = await ctxOf(c.ctx, ["status"]);
      assertEquals([st.code, st.stderr, st.stdout.split("\n").slice(0, 2)], [
        0,
        "",
        [`root=${c.mount}`, "root_via=dev"],
      ]);
      const sent = await ctxOf(c.ctx, ["agent", "send", "coder", "found", "it"]);
      assertEquals(sent, { code: 0, stdout: "found it\n", stderr: "" });

      d.child.kill("SIGKILL");
      await d.stop();
      d = null;
      const dead = `ctx: ENOTCONN: ${c.mount}: the CortexFS mount is dead (its daemon is gone): ` +
        `${HINT} again; it clears the dead mount first\n`;
      assertEquals(await ctxOf(c.ctx, ["status"]), { code: 69, stdout: "", stderr: dead });
      assertEquals(await ctxOf(c.ctx, ["agent", "send", "coder", "hi"], { CTX_ROOT: c.mount }), {
        code: 69,
        stdout: "",
        stderr: dead,
      });
      // Doing what it says works: the next start clears the dead mount and ctx finds it again.
      d = await startDaemon(c, { args: ["--dev"] });
      const again = await ctxOf(c.ctx, ["agent", "send", "coder", "back"]);
      assertEquals(again, { code: 0, stdout: "back\n", stderr: "" });
    } finally {
      await cleanup(c, d);
    }
  },
});

Deno.test("a tree whose daemon is gone: a refused socket and a missing one say so and how to start it, never ENOENT", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    assertEquals((await ctx(f, ["agent", "send", "coder", "up"])).code, 0);
    await d.kill9(); // the socket file stays behind: connecting is refused
    assertEquals(await ctx(f, ["agent", "send", "coder", "hi"]), {
      code: 69,
      stdout: "",
      stderr: "ctx: EHOSTDOWN: agent/coder.sock: the daemon serving this tree is gone " +
        `(connection refused); ${HINT} again\n`,
    });
    Deno.removeSync(`${f.run}/agent/coder.sock`); // as a clean stop leaves it: no socket at all
    assertEquals(await ctx(f, ["agent", "chat", "coder"]), {
      code: 69,
      stdout: "",
      stderr: `ctx: EHOSTDOWN: agent/coder.sock: no daemon is serving this tree (${f.root} is ` +
        `not a live mount, no socket): ${HINT}, then use its mount\n`,
    });
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("cortexfsd as an ordinary user says at once that it needs root and how to start it, and makes nothing", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "cortexfsd-user-" });
  Deno.chmodSync(dir, 0o777);
  const denoDir = nobodyDenoDir();
  try {
    const r = await run([
      DENO,
      "run",
      "-A",
      "--config",
      CONFIG,
      CORTEXFSD,
      ...[
        ["--storage", `${dir}/storage`],
        ["--mount", `${dir}/mount`],
        ["--run", `${dir}/run`],
      ].flat(),
    ], { uid: 65534, env: { DENO_DIR: denoDir, HOME: denoDir, NO_COLOR: "1" }, ms: 60_000 });
    assertEquals(r.code, EXIT.access, r.stderr);
    assertStringIncludes(r.stderr, "needs root");
    assertStringIncludes(r.stderr, "`sudo cortexfsd`");
    assertEquals([...Deno.readDirSync(dir)], [], "nothing made before the refusal");
  } finally {
    Deno.removeSync(dir, { recursive: true });
    Deno.removeSync(denoDir, { recursive: true });
  }
});

Deno.test({
  name:
    "dev mode keeps provider keys under .dev/: ctx provider set on the dev tree writes <checkout>/.dev/secrets, and the dev daemon's instances read keys from its own .dev/secrets",
  ignore: systemTree(),
  async fn() {
    const c = await checkout();
    let d: Daemon | null = null;
    try {
      update(c.storage, {});
      d = await startDaemon(c, { args: ["--dev"] });
      const set = await ctxOf(c.ctx, ["provider", "set", "devp"], {}, "sk-dev-0123456789\n");
      assertEquals([set.code, set.stdout], [
        0,
        `stored ${c.dir}/.dev/secrets/provider/devp/default\n`,
      ]);
      assertEquals(
        Deno.readTextFileSync(`${c.dir}/.dev/secrets/provider/devp/default`),
        "sk-dev-0123456789\n",
      );
      // The daemon (this repository's cortexfsd, so its checkout is REPO) hands its instances
      // REPO/.dev/secrets: the store of the checkout it runs from.
      assertEquals((await ctxOf(c.ctx, ["agent", "send", "coder", "up"])).code, 0);
      const pid = Number(Deno.readTextFileSync(`${c.mount}/agent/coder.d/pid`).trim());
      const environ = Deno.readTextFileSync(`/proc/${pid}/environ`).split("\0");
      assert(environ.includes(`CORTEXFS_SECRETS=${REPO}/.dev/secrets`), environ.join(" "));
    } finally {
      await cleanup(c, d);
      await Deno.remove(c.dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test("a script that waits for the mount and then sends is served: every agent's socket answers before /ctx appears", async () => {
  for (let i = 0; i < 3; i++) {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { wait: false });
      await until(() => {
        try {
          return Deno.statSync(`${tree.mount}/status`).isFile;
        } catch {
          return false;
        }
      }, "the mount's status file");
      // The moment the mount shows: the agent's socket is already there (it used to be missing
      // for up to 0.8 s, and a send then failed EHOSTDOWN).
      assert(Deno.statSync(`${tree.mount}/agent/coder.sock`).isSocket, "coder.sock at mount time");
      const r = await run(
        [
          DENO,
          "run",
          "-A",
          "--quiet",
          `--config=${CONFIG}`,
          `${REPO}/cli/ctx.ts`,
          "agent",
          "send",
          "coder",
          "up",
        ],
        { env: { CTX_ROOT: tree.mount, NO_COLOR: "1" }, ms: 30_000 },
      );
      assertEquals([r.code, r.stdout, r.stderr], [0, "up\n", ""]);
    } finally {
      await cleanup(tree, d);
    }
  }
});
