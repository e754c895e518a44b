/** `ctx` commands as a user runs them: a real child process on a real storage tree. */
import { assertEquals, assertMatch } from "../assert.ts";
import {
  CONFIG,
  CTX,
  ctxRun,
  DENO,
  nobodyDenoDir,
  openTempDir,
  REPO,
  run,
} from "../fixture/mod.ts";
import { VERSION } from "../../src/abi/version.ts";
import { ignore } from "../../src/abi/errno.ts";

async function withTree(fn: (root: string, storage: string) => Promise<void>): Promise<void> {
  const storage = await openTempDir("ctx-cli-");
  try {
    const made = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: storage } });
    assertEquals([made.code, made.stderr], [0, ""]);
    await fn(`${storage}/current`, storage);
  } finally {
    await Deno.remove(storage, { recursive: true });
  }
}

const at = (root: string) => ({ env: { CTX_ROOT: root } });

Deno.test("ctx status (also the default command) prints the tree's status lines", async () => {
  await withTree(async (root) => {
    const want = (via: string) => ({
      code: 0,
      stdout: `root=${root}\nroot_via=${via}\nstate=offline\ntree_version=5\nagents=1\n` +
        "tools=6\n",
      stderr: "",
    });
    assertEquals(await ctxRun(["status"], at(root)), want("CTX_ROOT"));
    assertEquals(await ctxRun([], at(root)), want("CTX_ROOT"));
    assertEquals(await ctxRun(["--root", root, "status"]), want("--root"));
  });
});

Deno.test("ctx on a CTX_ROOT or --root with no tree says no mount was found and how to start one (exit 69)", async () => {
  await withTree(async (root) => {
    const hint = "start it with `sudo cortexfsd` (in a checkout: `sudo tools/deno task dev`), " +
      "or point CTX_ROOT at a tree\n";
    for (const args of [["status"], ["ls", "agent"], ["agent", "send", "coder", "hi"]]) {
      assertEquals(await ctxRun(args, at(`${root}/nowhere`)), {
        code: 69,
        stdout: "",
        stderr: `ctx: no CortexFS mount found (tried ${root}/nowhere (CTX_ROOT)): ${hint}`,
      });
    }
    assertEquals(await ctxRun(["--root", `${root}/home/`, "cat", "agent/coder.d/window"]), {
      code: 69,
      stdout: "",
      stderr: `ctx: no CortexFS mount found (tried ${root}/home (--root)): ${hint}`,
    });
  });
});

Deno.test("ctx --version prints the version; --help ends with examples and the exit codes", async () => {
  const { VERSION } = await import("../../src/abi/version.ts");
  assertEquals(await ctxRun(["--version"]), { code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" });
  assertMatch(VERSION, /^\d+\.\d+\.\d+$/);
  const help = await ctxRun(["--help"]);
  assertEquals(help.code, 0);
  assertMatch(help.stdout, /\nExamples:\n {2}ctx status .*\n {2}ctx agent send coder "hello" /);
  assertMatch(help.stdout, /69 unavailable \(no mount found, daemon gone\)/);
});

Deno.test("ctx ls lists the root and ABI paths (with or without /ctx/)", async () => {
  await withTree(async (root) => {
    assertEquals(await ctxRun(["ls"], at(root)), {
      code: 0,
      stdout: "agent\nbin\nhome\nmodel\nshared\nstatus\ntool\n",
      stderr: "",
    });
    const model = { code: 0, stdout: "echo\necho.d\nscript\nscript.d\n", stderr: "" };
    assertEquals(await ctxRun(["ls", "model/debug"], at(root)), model);
    assertEquals(await ctxRun(["ls", "/ctx/model/debug"], at(root)), model);
    assertEquals(await ctxRun(["ls", `${root}/model/debug`], at(root)), model);
    assertEquals(await ctxRun(["ls", "shared"], at(root)), { code: 0, stdout: "", stderr: "" });
    assertEquals(await ctxRun(["ls", "nope"], at(root)), {
      code: 1,
      stdout: "",
      stderr: "ctx: ENOENT: nope: no such file or directory\n",
    });
    assertEquals(await ctxRun(["ls", "../etc"], at(root)), {
      code: 2,
      stdout: "",
      stderr: `ctx: EINVAL: ../etc: ".." is not allowed in an ABI path\n`,
    });
    assertEquals(await ctxRun(["ls", "/etc"], at(root)), {
      code: 2,
      stdout: "",
      stderr: `ctx: EINVAL: /etc: absolute path is not below /ctx or CTX_ROOT (${root})\n`,
    });
  });
});

Deno.test("ctx cat prints a file's bytes; directories and missing files fail with errno", async () => {
  await withTree(async (root) => {
    assertEquals(await ctxRun(["cat", "agent/coder.d/window"], at(root)), {
      code: 0,
      stdout: "auto\n",
      stderr: "",
    });
    assertEquals(await ctxRun(["cat", "/ctx/model/debug/echo.d/limit"], at(root)), {
      code: 0,
      stdout: "131072\n",
      stderr: "",
    });
    assertEquals(await ctxRun(["cat", "agent"], at(root)), {
      code: 1,
      stdout: "",
      stderr: "ctx: EISDIR: agent: is a directory\n",
    });
    assertEquals((await ctxRun(["cat"], at(root))).code, 2);
  });
});

Deno.test("ctx set writes valid values atomically, adding the final newline to one-value files", async () => {
  await withTree(async (root) => {
    const w = `${root}/agent/coder.d/window`;
    const ok = { code: 0, stdout: "", stderr: "" };
    assertEquals(await ctxRun(["set", "agent/coder.d/window", "4096"], at(root)), ok);
    assertEquals(Deno.readTextFileSync(w), "4096\n");
    assertEquals(await ctxRun(["set", "/ctx/agent/coder.d/window", "131072\n"], at(root)), ok);
    assertEquals(Deno.readTextFileSync(w), "131072\n");
    assertEquals(await ctxRun(["set", "agent/coder.d/window", "auto"], at(root)), ok);
    assertEquals(Deno.readTextFileSync(w), "auto\n");
    assertEquals(await ctxRun(["set", "agent/coder.d/perm", "r--"], at(root)), ok);
    assertEquals(Deno.readTextFileSync(`${root}/agent/coder.d/perm`), "r--\n");
    // A list control takes VALUE as given; `-` reads it from stdin.
    assertEquals(
      await ctxRun(["set", "agent/coder.d/tools", "-"], { ...at(root), stdin: "fs.read\nbash\n" }),
      ok,
    );
    assertEquals(Deno.readTextFileSync(`${root}/agent/coder.d/tools`), "fs.read\nbash\n");
    assertEquals(Deno.readDirSync(`${root}/agent/coder.d`).toArray().length, 22); // no temp left
  });
});

Deno.test("every rejected ctx set leaves the file byte-for-byte unchanged and says why", async () => {
  await withTree(async (root) => {
    // [path, value, exit code, errno, the rule's words]
    const cases: [string, string, number, string, RegExp][] = [
      ["agent/coder.d/window", "0", 2, "EINVAL", /"0"/],
      ["agent/coder.d/window", "01", 2, "EINVAL", /leading zero/],
      ["agent/coder.d/window", "+1", 2, "EINVAL", /"\+1"/],
      ["agent/coder.d/window", " 1", 2, "EINVAL", /" 1"/],
      ["agent/coder.d/window", "1\n\n", 2, "EINVAL", /extra lines/],
      ["agent/coder.d/window", "4294967296", 2, "EINVAL", /4294967296/],
      ["agent/coder.d/window", "AUTO", 2, "EINVAL", /"AUTO"/],
      ["agent/coder.d/window", "-1", 2, "EINVAL", /"-1"/],
      ["agent/coder.d/window", "131073", 2, "EINVAL", /larger than the limit 131072/],
      ["agent/coder.d/perm", "rwz", 2, "EINVAL", /"rwz"/],
      ["agent/coder.d/abi", "argv-v1", 2, "EINVAL", /sdk-envelope-v1/],
      ["agent/coder.d/approval", "maybe", 2, "EINVAL", /"maybe"/],
      ["agent/coder.d/tools", "tsh\n", 2, "EINVAL", /tsh/],
      ["agent/coder.d/model", "nope/none", 1, "ENOENT", /nope\/none/],
      ["agent/coder.d/nope", "1", 2, "EINVAL", /not a control/],
      ["agent/coder.d/status", "busy", 1, "EROFS", /read-only/],
      ["model/debug/echo.d/limit", "5", 1, "EROFS", /read-only/],
      ["status", "x", 1, "EROFS", /read-only projection/],
      ["agent/coder", "x", 1, "EROFS", /read-only projection/],
      ["bin/cortexfs.bootstrap.json", "{}", 1, "EROFS", /read-only projection/],
      ["home/0/notes", "x", 2, "EINVAL", /not a control file/],
    ];
    for (const [path, value, code, errno, rule] of cases) {
      const file = `${root}/${path}`;
      let before: Uint8Array | null = null;
      try {
        before = Deno.readFileSync(file);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* an unknown control does not exist */
      }
      const r = await ctxRun(["set", path, "--", value], at(root));
      const label = `set ${path} ${JSON.stringify(value)}: ${r.stderr}`;
      assertEquals([r.code, r.stdout], [code, ""], label);
      assertMatch(r.stderr, new RegExp(`^ctx: ${errno}: ${path}: `), label);
      assertMatch(r.stderr, rule, label);
      let after: Uint8Array | null = null;
      try {
        after = Deno.readFileSync(file);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* still absent */
      }
      assertEquals(after, before, label);
    }
    // The window/model invariant, the other way round: an explicit window blocks a model switch.
    assertEquals((await ctxRun(["set", "agent/coder.d/window", "1000"], at(root))).code, 0);
    Deno.mkdirSync(`${root}/model/debug/tiny.d`, { recursive: true });
    Deno.writeTextFileSync(`${root}/model/debug/tiny`, "#!/usr/bin/cortexfs-object-runner\n");
    Deno.writeTextFileSync(`${root}/model/debug/tiny.d/driver`, "debug\n");
    Deno.writeTextFileSync(`${root}/model/debug/tiny.d/limit`, "unknown\n");
    const r = await ctxRun(["set", "agent/coder.d/model", "debug/tiny"], at(root));
    assertEquals([r.code, Deno.readTextFileSync(`${root}/agent/coder.d/model`)], [
      2,
      "debug/echo\n",
    ]);
    assertMatch(r.stderr, /^ctx: EINVAL: agent\/coder.d\/model: .*unknown/);
  });
});

Deno.test({
  name: "ctx set by a uid that does not own the agent is EACCES and changes nothing",
  ignore: Deno.uid() !== 0, // needs root to run ctx as uid 65534 (setpriv); CI runs as root
  fn: async () => {
    const denoDir = nobodyDenoDir();
    try {
      await withTree(async (root, storage) => {
        // The storage tree is root's; nobody may read it but owns no agent in it.
        Deno.chmodSync(storage, 0o755);
        const before = Deno.readFileSync(`${root}/agent/coder.d/window`);
        const r = await ctxRun(["set", "agent/coder.d/window", "1024"], {
          env: { CTX_ROOT: root, DENO_DIR: denoDir },
          as: 65534,
        });
        assertEquals([r.code, r.stdout], [13, ""], r.stderr);
        assertMatch(r.stderr, /^ctx: EACCES: agent\/coder.d\/window: .*owner/);
        assertEquals(Deno.readFileSync(`${root}/agent/coder.d/window`), before);
        // Reading stays open to everyone.
        const cat = await ctxRun(["cat", "agent/coder.d/window"], {
          env: { CTX_ROOT: root, DENO_DIR: denoDir },
          as: 65534,
        });
        assertEquals(cat, { code: 0, stdout: "auto\n", stderr: "" });
      });
    } finally {
      Deno.removeSync(denoDir, { recursive: true });
    }
  },
});

Deno.test("ctx validate-name answers by exit code and names the broken rule", async () => {
  for (const name of ["coder", "a.b_c+d-1", "x".repeat(64)]) {
    assertEquals(await ctxRun(["validate-name", name]), { code: 0, stdout: "", stderr: "" });
  }
  assertEquals(await ctxRun(["validate-name", "--kind", "model", "debug/echo"]), {
    code: 0,
    stdout: "",
    stderr: "",
  });
  const bad: [string, string][] = [
    ["a b", `ctx: EINVAL: a b: name "a b" contains whitespace\n`],
    ["x.sock", `ctx: EINVAL: x.sock: name "x.sock" ends with ".sock" (reserved for sockets)\n`],
    ["..", `ctx: EINVAL: ..: name ".." is reserved ("." and ".." are not names)\n`],
    ["_x", `ctx: EINVAL: _x: name "_x" must start with a letter or digit, not "_"\n`],
  ];
  for (const [name, stderr] of bad) {
    assertEquals(await ctxRun(["validate-name", "--", name]), { code: 2, stdout: "", stderr });
  }
  assertEquals((await ctxRun(["validate-name", "x".repeat(65)])).code, 2);
  assertEquals((await ctxRun(["validate-name", "--kind", "planet", "x"])).code, 2);
});

Deno.test("ctx help lists the commands; usage errors exit 2 in the error format", async () => {
  const help = await ctxRun(["help"]);
  assertEquals([help.code, help.stderr], [0, ""]);
  for (const c of ["status", "ls", "cat", "set", "validate-name", "storage", "agent", "help"]) {
    assertMatch(help.stdout, new RegExp(`^  ${c}\\b`, "m"));
  }
  const sub = await ctxRun(["storage", "update", "--help"]);
  assertEquals(sub.code, 0);
  for (const o of ["--check", "--dry-run", "--prune", "--storage"]) {
    assertMatch(sub.stdout, new RegExp(o));
  }
  assertEquals(await ctxRun(["bogus"]), {
    code: 2,
    stdout: "",
    stderr: "ctx: EINVAL: ctx: unknown command 'bogus'\n",
  });
  assertEquals(await ctxRun(["storage", "update", "--nope"]), {
    code: 2,
    stdout: "",
    stderr: "ctx: EINVAL: ctx: unknown option '--nope'\n",
  });
});

Deno.test("ctx doctor reports that bubblewrap can create user and pid namespaces here", async () => {
  const r = await ctxRun(["doctor"]);
  assertEquals(
    { code: r.code, works: /user and pid namespaces work/.test(r.stdout), stderr: r.stderr },
    { code: 0, works: true, stderr: "" },
  );
});

Deno.test("every program answers --version, outside any agent view; ctx --help lists every command, terminal too", async () => {
  for (const program of ["ctx", "tsh", "ctxterm", "cortexfsd"]) {
    for (const flag of ["--version", "-V"]) {
      const r = await run([
        DENO,
        "run",
        "-A",
        "--config",
        CONFIG,
        `${REPO}/cli/${program}.ts`,
        flag,
      ], {
        env: { NO_COLOR: "1" },
        ms: 60_000,
      });
      assertEquals([program, flag, r.code, r.stdout], [
        program,
        flag,
        0,
        `${program} ${VERSION}\n`,
      ]);
    }
  }
  const help = await run([DENO, "run", "-A", "--config", CONFIG, CTX, "--help"], { ms: 60_000 });
  assertEquals(help.code, 0, help.stderr);
  for (const command of ["status", "set", "storage", "provider", "doctor", "agent", "terminal"]) {
    assertMatch(help.stdout, new RegExp(`^  ${command} `, "m"), command);
  }
});
