/** Issue 8 hole 9: an agent's tools run under hard resource limits, which its `rlimit` control may only lower. */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../assert.ts";
import { type Ran, sh, type Target, withTarget } from "../fixture/mod.ts";
import { until } from "../fixture/wait.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";

/** The agent under attack runs as this uid (not root: the kernel exempts uid 0 from RLIMIT_NPROC). */
const USER = 1000;
const NPROC = 32;
const CPU = 5;

/** One `tool_result` of a `ctx agent tsh --json` call, with how the client ended and how long it took. */
interface Called {
  ran: Ran;
  ms: number;
  result: { status: string; content: string; errno?: string };
}

/** `ctx agent tsh bob --json -- bash SCRIPT` as the agent's owner, from its workspace. */
async function bash(t: Target, script: string, ms = 60_000): Promise<Called> {
  const t0 = Date.now();
  const ran = await t.ctx(["agent", "tsh", "bob", "--json", "--", "bash", script], {
    uid: USER,
    cwd: workspace(t),
    ms,
  });
  const took = Date.now() - t0;
  const frames = ran.stdout.trim().split("\n").filter((l) => l.startsWith("{")).map((l) =>
    JSON.parse(l)
  );
  const msg = frames.find((f) => f.type === "message" && f.role === "tool");
  assert(msg, `no tool message in: ${ran.stdout} ${ran.stderr}`);
  return { ran, ms: took, result: msg.content[0] };
}

const workspace = (t: Target) => `${t.tree.dir}/ws`;

/** bob (uid 1000, `rlimit` nproc 32 and cpu 5) and a workspace it owns, made before the daemon starts. */
function setup(tree: Target["tree"]): void {
  createAgent(tree.root, "bob", { uid: USER, gid: USER });
  replaceFile(`${tree.root}/agent/bob.d/rlimit`, `nproc ${NPROC}\ncpu ${CPU}\n`);
  Deno.mkdirSync(`${tree.dir}/ws`, { mode: 0o755 });
  Deno.chownSync(`${tree.dir}/ws`, USER, USER);
}

/** The limits bash reports inside bob's sandbox, as `-u -d -n -t` values. */
const ULIMITS = "ulimit -u; ulimit -d; ulimit -n; ulimit -t";

/** What bob's tools must run under: the control's nproc and cpu, the default data and nofile. */
const EXPECTED = `${NPROC}\n${2048 * 1024}\n1024\n${CPU}\n`;

/** Root's `ctx agent send coder`: another user's agent answers (bounded by the fixture). */
async function otherSend(t: Target, text: string): Promise<{ start: number; end: number }> {
  const start = Date.now();
  const r = await t.ctx(["agent", "send", "coder", text], { ms: 20_000 });
  assertEquals({ code: r.code, out: r.stdout }, { code: 0, out: `${text}\n` }, r.stderr);
  return { start, end: Date.now() };
}

// The bomb: `:(){ :|:& };:` in the background, which fills bob's process limit within
// milliseconds, then (exec: no fork of its own) perl waits 3 s and forks once. That fork must fail
// with EAGAIN at once: perl says so and exits 11. tsh ends the bomb's process group when perl
// exits; the sandbox (pid namespace) ends with tsh.
const BOMB = `:(){ :|:& };:
exec perl -e 'select(undef, undef, undef, 3); my $p = fork;
  if (!defined $p) { print STDERR "bomb contained: fork: $!\\n"; exit 11 }
  if ($p == 0) { exit 0 } waitpid($p, 0); print "fork succeeded\\n"; exit 0'`;

Deno.test("a fork bomb in tsh bash hits the agent's nproc: the call ends with the tool's error, other users' agents and the mount keep answering", async () => {
  await withTarget(async (t) => {
    // Never start a bomb that is not bounded: the limits must be in force first.
    const limits = await bash(t, ULIMITS);
    assertEquals(limits.result.content, EXPECTED, "the limits are in force before any bomb");

    let finished = false;
    const bomb = bash(t, BOMB, 60_000).finally(() => finished = true);
    // Other users' work while the bomb runs (back to back, no sleeps), and once after it.
    const during = (async () => {
      const sends: { start: number; end: number }[] = [];
      do {
        await t.bystander();
        sends.push(await otherSend(t, "still here"));
      } while (!finished);
      return sends;
    })();
    const [b, sends] = await Promise.all([bomb, during]);
    const bombEnd = Date.now();
    await t.bystander();
    await otherSend(t, "after the bomb");

    const retries = b.result.content.split("fork: retry: ").length - 1;
    console.log(
      `fork bomb call: ${b.ms} ms, ctx exit ${b.ran.code}, status ${b.result.status}, ` +
        `${retries} "fork: retry" lines, ends ${JSON.stringify(b.result.content.slice(-160))}`,
    );
    // The tool's own failure, reported as the tool's result: not a crash of tsh (EIO), not a
    // timeout (the fixture bounds the call).
    // (The frame carries no exit code; ctx exits 1 for a tool that failed.)
    assertEquals([b.result.status, b.result.errno, b.ran.code], ["error", undefined, 1]);
    assertMatch(b.result.content, /bomb contained: fork: Resource temporarily unavailable\n/);
    // At least one other user's send ran entirely while the bomb was running.
    const t0 = bombEnd - b.ms;
    assert(
      sends.some((s) => s.start >= t0 && s.end <= bombEnd),
      `no send during the bomb: ${JSON.stringify(sends.map((s) => [s.start - t0, s.end - t0]))}`,
    );
    // Nothing of the bomb is left: bob's next call starts and sees its full limits again.
    assertEquals((await bash(t, ULIMITS)).result.content, EXPECTED);
  }, { setup });
});

/** Processes of uid {@link USER} whose command line holds `mark`. */
function holding(mark: string): number[] {
  const pids: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (Deno.statSync(`/proc/${e.name}`).uid !== USER) continue;
      if (Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes(mark)) pids.push(+e.name);
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

// What the data limit does is asserted, not how a program words its failure: on a machine with
// more memory a hog may be killed rather than print "memory exhausted" (issue 25 item 4).
Deno.test("a memory hog in tsh bash hits RLIMIT_DATA: the allocation fails as an error result, nothing of it remains, the daemon answers", async () => {
  await withTarget(async (t) => {
    const mark = `hog-${crypto.randomUUID()}`;
    // The same program within the limit succeeds: what fails below is the limit.
    const small = await bash(t, `exec python3 -c 'print(len(bytearray(64 << 20)))' ${mark}`);
    assertEquals([small.result.status, small.result.content], ["ok", `${64 << 20}\n`]);
    // tail keeps the whole (newline-free) line: it would need 5 GiB; python asks for 5 GiB at once.
    for (
      const hog of [
        `head -c 5G /dev/zero | (exec -a tail-${mark} tail -n1)`,
        `python3 -c 'b = bytearray(5 << 30); print("allocated", len(b))' ${mark}`,
      ]
    ) {
      const r = await bash(t, hog);
      console.log(`${hog.slice(0, 24)}: ${r.result.status} ${JSON.stringify(r.result.content)}`);
      // The command failed on its own (an error result, no errno of tsh), without the memory.
      assertEquals([r.result.status, r.result.errno, r.ran.code], ["error", undefined, 1]);
      assert(!r.result.content.includes("allocated"), r.result.content);
    }
    await until(() => holding(mark).length === 0, "no process of the hogs left");
    assertEquals((await bash(t, ULIMITS)).result.content, EXPECTED);
    await t.bystander();
    await otherSend(t, "after the hog");
  }, { setup });
});

Deno.test("ulimit inside the sandbox shows the configured limits, and none can be raised", async () => {
  await withTarget(async (t) => {
    assertEquals((await bash(t, ULIMITS)).result.content, EXPECTED);
    // Soft and hard alike: the hard limit is the configured one, so no raise is permitted.
    assertEquals(
      (await bash(t, "ulimit -Hu; ulimit -Hd; ulimit -Hn; ulimit -Ht")).result.content,
      EXPECTED,
    );
    for (
      const raise of ["ulimit -u 100000", "ulimit -d unlimited", "ulimit -n 4096", "ulimit -t 1000"]
    ) {
      const r = await bash(t, `${raise} && echo raised`);
      assertEquals([raise, r.result.status, r.ran.code], [raise, "error", 1]);
      assertStringIncludes(r.result.content, "Operation not permitted");
      assert(!r.result.content.includes("raised"), r.result.content);
    }
    // prlimit (the binary the sandbox itself uses) cannot raise them either.
    const p = await bash(t, "prlimit --pid $$ --nproc=100000 && echo raised");
    assertEquals(p.result.status, "error");
    assert(!p.result.content.includes("raised"), p.result.content);
  }, { setup });
});

Deno.test("the rlimit control through the mount: above a default is EINVAL and changes nothing, a lowering holds", async () => {
  await withTarget(async (t) => {
    const control = `${t.tree.mount}/agent/bob.d/rlimit`;
    const before = `nproc ${NPROC}\ncpu ${CPU}\n`;
    assertEquals(Deno.readTextFileSync(control), before);
    for (const line of ["nproc 100000", "cpu 121", "data 4096", "nofile 1025"]) {
      // bob's owner tries to raise its own limits; root may not either.
      for (const uid of [USER, 0]) {
        const r = await sh(`echo '${line}' > ${control}`, { uid });
        assertEquals([line, uid, r.code], [line, uid, 1]);
        assertStringIncludes(r.stderr, "Invalid argument");
      }
    }
    assertEquals(Deno.readTextFileSync(control), before);
    // A valid lowering by the owner succeeds and is what the next tool runs under.
    const low = await sh(`printf 'nproc 16\\ncpu 3\\nnofile 64\\n' > ${control}`, { uid: USER });
    assertEquals(low.code, 0, low.stderr);
    assertEquals(Deno.readTextFileSync(control), "nproc 16\ncpu 3\nnofile 64\n");
    assertEquals((await bash(t, ULIMITS)).result.content, `16\n${2048 * 1024}\n64\n3\n`);
  }, { setup });
});
