/** Issue 8 hole 3: client paths inside /ctx never deadlock the daemon that serves /ctx. */
import { assertEquals } from "../assert.ts";
import { CONFIG, CTX, type Daemon, DENO, makeTree, startDaemon } from "../fixture/mod.ts";
import { mountedType } from "../../src/fuse/mount.ts";

/** A hang is a failure after this long, never a stalled suite. */
const BOUND_MS = 20_000;

/** What a bounded child run gave. */
interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Thrown when a bounded wait ran out: the test's cleanup then kills and lazily unmounts. */
class Hung extends Error {}

/** Resolves with `p` or rejects with Hung after `ms`; the timer never outlives the race. */
async function bounded<T>(p: Promise<T>, what: string, ms = BOUND_MS): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Hung(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `cmd args` in `cwd` to completion, SIGKILLed (and a Hung failure) after the bound. */
async function run(
  cmd: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<Ran> {
  const child = new Deno.Command(cmd, {
    args,
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = child.output();
  try {
    const o = await bounded(out, `${cmd} ${args.join(" ")}`);
    const dec = new TextDecoder();
    return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
  } catch (e) {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await out.catch(() => {});
    throw e;
  }
}

/** `ctx ARGS` as a user runs it: the project's CLI, CTX_ROOT at the mount, from `cwd`. */
function ctx(mount: string, cwd: string, args: string[]): Promise<Ran> {
  return run(DENO, ["run", "-A", "--quiet", `--config=${CONFIG}`, CTX, ...args], {
    cwd,
    env: { CTX_ROOT: mount, NO_COLOR: "1" },
  });
}

/** One `stat` of `<mount>/status` by another process; its exit code (bounded). */
async function statStatus(mount: string): Promise<number> {
  return (await run("stat", ["-c", "%F", `${mount}/status`])).code;
}

/**
 * Runs `job` while other processes `stat` the mount back to back until it ends (no sleeps: each
 * stat starts when the last one returned); every stat, during and once after, must succeed.
 */
async function withStats<T>(mount: string, job: Promise<T>): Promise<T> {
  let finished = false;
  const tracked = job.finally(() => finished = true);
  const probes = (async () => {
    const codes: number[] = [];
    do codes.push(await statStatus(mount)); while (!finished);
    return codes;
  })();
  const [result, codes] = await Promise.all([tracked, probes]);
  codes.push(await statStatus(mount));
  assertEquals(codes.filter((c) => c !== 0), [], "every stat of the mount succeeds");
  return result;
}

/**
 * Starts a daemon on a fresh tree, runs `body`, then SIGTERM must end it (exit 0) and unmount.
 * Whatever happens, nothing is left behind: a daemon that does not exit within the bound is
 * SIGKILLed and its mount lazily unmounted.
 */
async function withDaemon(
  body: (tree: { dir: string; mount: string }, d: Daemon) => Promise<void>,
): Promise<void> {
  const tree = await makeTree();
  let d: Daemon | null = null;
  let failure: unknown = null;
  try {
    d = await startDaemon(tree);
    await body(tree, d);
  } catch (e) {
    failure = e;
  }
  try {
    if (d) {
      let code: number | "hung";
      try {
        code = await bounded(d.stop(), "cortexfsd after SIGTERM");
      } catch (e) {
        if (!(e instanceof Hung)) throw e;
        code = "hung";
        d.child.kill("SIGKILL");
        await d.stop();
      }
      if (failure === null) {
        assertEquals({ code, mounted: mountedType(tree.mount) }, { code: 0, mounted: null });
      }
    }
  } finally {
    if (mountedType(tree.mount) !== null) {
      await new Deno.Command("umount", { args: ["-l", tree.mount] }).output();
    }
    await Deno.remove(tree.dir, { recursive: true }).catch(() => {});
  }
  if (failure !== null) throw failure;
}

Deno.test("ctx agent tsh from a workspace inside <mount>/home works and the mount keeps answering", async () => {
  await withDaemon(async (tree) => {
    // Created through the mount, as a user would: the workspace lives inside /ctx/home.
    const proj = `${tree.mount}/home/0/proj`;
    await Deno.mkdir(proj);
    await Deno.writeTextFile(`${proj}/hello.txt`, "hi\n");
    const listed = await withStats(
      tree.mount,
      ctx(tree.mount, proj, ["agent", "tsh", "coder", "--", "fs.list", "/workspace"]),
    );
    // .git: the empty read-only one every writable workspace root gets (spec/sandbox.md).
    assertEquals({ code: listed.code, out: listed.stdout }, {
      code: 0,
      out: ".git\tdir\nhello.txt\tfile\n",
    });
  });
});

// A sdk-envelope-v1 agent: step 0 asks for fs.list of its workspace, step 1 says what it observed.
const LISTER = `#!/bin/bash
IFS= read -r line
if [ "$CTX_AGENT_STEP" = 0 ]; then
  printf '{"type":"tool_call","id":"call-1","name":"tsh","arguments":{"args":["fs.list","/workspace"]}}\\n'
else
  status=none
  [[ $line =~ \\"status\\":\\"(ok|error)\\" ]] && status=\${BASH_REMATCH[1]}
  printf '{"type":"message","role":"assistant","content":"observed %s"}\\n' "$status"
fi
`;

Deno.test("ctx agent send from a cwd under <mount>/agent ends (no hang) and the mount keeps answering", async () => {
  await withDaemon(async (tree) => {
    const agentDir = `${tree.mount}/agent`;
    // The plain model-backed agent, from a cwd inside the mount.
    const hi = await withStats(
      tree.mount,
      ctx(tree.mount, agentDir, ["agent", "send", "coder", "hi"]),
    );
    assertEquals({ code: hi.code, out: hi.stdout }, { code: 0, out: "hi\n" });

    // An agent made through the mount (its socket comes from the rename's onAgent hook) whose
    // tool call resolves the client's workspace, here /ctx/agent itself.
    const prog = `${tree.dir}/lister.sh`;
    await Deno.writeTextFile(prog, LISTER, { mode: 0o755 });
    const made = await ctx(tree.mount, tree.dir, ["agent", "new", "lister", "--exec", prog]);
    assertEquals(made.code, 0, made.stderr);
    const sent = await withStats(
      tree.mount,
      ctx(tree.mount, agentDir, ["agent", "send", "lister", "list"]),
    );
    // The run ended, and the tool call it made (fs.list of a workspace in /ctx) worked.
    assertEquals({ code: sent.code, out: sent.stdout }, { code: 0, out: "observed ok\n" });
  });
});
