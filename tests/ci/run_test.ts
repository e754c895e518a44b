/** `.ci/run` is as strict as the desk: a failing `deno task check` fails the run and is counted. */
import { assertEquals } from "../assert.ts";
import { REPO, run } from "../fixture/mod.ts";
import { readmeBlocks } from "../packaging/fresh.ts";

/**
 * Runs a copy of `.ci/run` in a temp checkout whose `tools/deno` is a stub (it records each call;
 * `task check` exits `checkRc`, `task test` prints one Deno summary line). As an ordinary uid, so
 * the script skips its apt-get step.
 */
async function ci(checkRc: number): Promise<{ code: number; lines: string[]; calls: string[] }> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-ci-" });
  try {
    Deno.chmodSync(dir, 0o777);
    Deno.mkdirSync(`${dir}/.ci`);
    Deno.mkdirSync(`${dir}/tools`);
    Deno.copyFileSync(`${REPO}/.ci/run`, `${dir}/.ci/run`);
    Deno.writeTextFileSync(
      `${dir}/tools/deno`,
      `#!/bin/bash
echo "$*" >>"${dir}/calls"
case "$*" in
--version) echo "deno 2.9.6" ;;
"task check") echo "error: Found 1 not formatted file" >&2; exit ${checkRc} ;;
"task test") echo "ok | 3 passed | 0 failed (1s)" ;;
esac
`,
    );
    Deno.chmodSync(`${dir}/tools/deno`, 0o755);
    Deno.chmodSync(`${dir}/.ci/run`, 0o755);
    const out = await new Deno.Command("setpriv", {
      args: ["--reuid=65534", "--regid=65534", "--clear-groups", `${dir}/.ci/run`],
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", HOME: dir },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    const calls = Deno.readTextFileSync(`${dir}/calls`).trim().split("\n");
    return { code: out.code, lines, calls };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(".ci/run runs deno task check before the tests; a failing check fails the run and counts as a failure", async () => {
  const bad = await ci(1);
  assertEquals(
    {
      code: bad.code,
      last: bad.lines.at(-1),
      calls: bad.calls.filter((c) => c.startsWith("task")),
    },
    { code: 1, last: "3 passed, 1 failed", calls: ["task check", "task test"] },
  );
  const good = await ci(0);
  assertEquals(
    {
      code: good.code,
      last: good.lines.at(-1),
      calls: good.calls.filter((c) => c.startsWith("task")),
    },
    { code: 0, last: "3 passed, 0 failed", calls: ["task check", "task test"] },
  );
});

/**
 * README's prerequisites block, its lines run as written, with `sudo` and `apt-get` as stubs that
 * record what apt-get is asked for; `npm` present (as NodeSource's nodejs brings it) or absent.
 */
async function prerequisites(npm: boolean): Promise<string[]> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-prereq-" });
  try {
    const stub = (name: string, body: string) => {
      Deno.writeTextFileSync(`${dir}/${name}`, `#!/bin/bash\n${body}\n`);
      Deno.chmodSync(`${dir}/${name}`, 0o755);
    };
    stub("sudo", 'exec "$@"');
    stub("apt-get", `echo "$*" >>"${dir}/asked"`);
    if (npm) stub("npm", "exit 0");
    const [block] = readmeBlocks("From a checkout: prerequisites (fresh Debian/Ubuntu)");
    // Only the stubs on PATH: this machine's own npm must not answer `command -v npm`.
    const r = await run(["/bin/bash", "-e", "-c", block.join("\n")], {
      clearEnv: true,
      env: { PATH: dir },
    });
    assertEquals(r.code, 0, r.stderr);
    return Deno.readTextFileSync(`${dir}/asked`).trim().split("\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("README's prerequisites ask apt-get for npm only where there is none (NodeSource's nodejs brings its own, and Debian's npm conflicts with it)", async () => {
  const base = "install -y fuse3 bubblewrap tmux gcc attr python3";
  assertEquals(await prerequisites(true), [base]);
  assertEquals(await prerequisites(false), [base, "install -y nodejs npm"]);
});
