/** The build's launcher route (the one that works offline here): real launchers, run for real. */
import { assertEquals, assertMatch } from "../tests/assert.ts";
import { build, findDenort, launcher, permissionFlags } from "./build.ts";

Deno.test("build makes launcher scripts with each binary's permission flags when no denort exists", async () => {
  const dist = await Deno.makeTempDir({ prefix: "ctx-build-" });
  const out = `${dist}/bin`;
  const storage = await Deno.makeTempDir({ prefix: "ctx-build-st-" });
  try {
    const env = { HOME: "/nonexistent", DENO_DIR: `${dist}/no-deno-dir` };
    assertEquals(findDenort(env), undefined);
    const r = await build({ out, env, single: false });
    assertEquals(r.mode, "launcher");
    assertEquals(r.built.includes("ctx"), true);
    for (const name of r.built.filter((n) => n !== "agent.sh" && n !== "tsh.js")) {
      assertEquals(
        Deno.readTextFileSync(`${out}/${name}`),
        launcher(name, permissionFlags()[name]),
      );
      assertEquals((Deno.statSync(`${out}/${name}`).mode ?? 0) & 0o777, 0o755);
    }
    assertEquals([...r.built, ...r.skipped].sort(), [
      "agent.sh",
      "cortexfsd",
      "ctx",
      "ctxterm",
      "tsh",
      "tsh.js",
    ]);
    // The in-sandbox tsh bundle sits beside bin/ and runs on its own (no config, lock, remote
    // or npm: exactly as runTsh starts it in a sandbox).
    assertEquals(r.bundle, `${dist}/tsh/tsh.js`);
    // The ctx launcher runs with exactly ctx's permission set: a storage update and a read work.
    const run = (args: string[], extra: Record<string, string>) =>
      new Deno.Command(`${out}/ctx`, {
        args,
        env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", NO_COLOR: "1", ...extra },
        clearEnv: true,
      }).output();
    const up = await run(["storage", "update"], { CORTEXFS_STORAGE: storage });
    assertEquals(up.code, 0, new TextDecoder().decode(up.stderr));
    const ls = await run(["ls", "agent"], { CTX_ROOT: `${storage}/current` });
    assertEquals(
      { code: ls.code, out: new TextDecoder().decode(ls.stdout) },
      { code: 0, out: "coder\ncoder.d\n" },
    );
    const tsh = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        ...permissionFlags().tsh,
        `${dist}/tsh/tsh.js`,
        "--root",
        `${storage}/current`,
        "tools",
      ],
      env: { CTX_PATH: "/ctx/tool", NO_COLOR: "1" },
      clearEnv: true,
    }).output();
    assertEquals(
      { code: tsh.code, out: new TextDecoder().decode(tsh.stdout) },
      { code: 0, out: "bash\nfs.list\nfs.read\nfs.replace\nfs.stat\nfs.write\n" },
    );
  } finally {
    await Deno.remove(dist, { recursive: true });
    await Deno.remove(storage, { recursive: true });
  }
});

Deno.test("build refuses compile mode without a denort runtime", async () => {
  const out = await Deno.makeTempDir({ prefix: "ctx-build-" });
  try {
    const e = await build({ out, mode: "compile", env: { HOME: "/nonexistent" }, single: false })
      .catch((x) => x);
    assertMatch(String(e), /compile mode needs DENORT_BIN/);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test({
  name:
    "the built cortexfsd launcher starts agent instances with the same deno and permission set: a send through the built ctx is served by `cortexfsd instance coder`",
  ignore: Deno.uid() !== 0,
  async fn() {
    const { cleanup, makeTree, until } = await import("../tests/fixture/mod.ts");
    const dist = await Deno.makeTempDir({ prefix: "ctx-build-" });
    const out = `${dist}/bin`;
    const tree = await makeTree();
    let child: Deno.ChildProcess | undefined;
    try {
      await build({ out, env: { HOME: "/nonexistent", DENO_DIR: `${dist}/no-deno-dir` } });
      child = new Deno.Command(`${out}/cortexfsd`, {
        args: ["--storage", tree.storage, "--mount", tree.mount, "--run", tree.run],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      let log = "";
      const pump = (async () => {
        for await (const c of child.stderr) log += new TextDecoder().decode(c);
      })();
      await until(() => log.includes("the mount's serving thread:"), "the built cortexfsd");
      const sent = await new Deno.Command(`${out}/ctx`, {
        args: ["agent", "send", "coder", "built"],
        env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", CTX_ROOT: tree.mount, NO_COLOR: "1" },
        clearEnv: true,
      }).output();
      const dec = new TextDecoder();
      assertEquals([sent.code, dec.decode(sent.stdout)], [0, "built\n"], dec.decode(sent.stderr));
      const r = JSON.parse(Deno.readTextFileSync(`${tree.run}/instance/coder.json`));
      const argv = Deno.readTextFileSync(`/proc/${r.pid}/cmdline`).split("\0");
      assertEquals(argv.slice(argv.indexOf("instance"), argv.indexOf("instance") + 2), [
        "instance",
        "coder",
      ]);
      assertEquals(argv.includes("--allow-all"), true); // src/program/permissions.json cortexfsd
      child.kill("SIGTERM");
      assertEquals((await child.status).code, 0);
      await pump;
      child = undefined;
    } finally {
      if (child) {
        child.kill("SIGKILL");
        await child.status;
      }
      await cleanup(tree);
      await Deno.remove(dist, { recursive: true });
    }
  },
});
