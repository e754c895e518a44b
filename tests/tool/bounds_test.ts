/** Tool runs are bounded while they run: a flood is ended, a wall-clock bound gives ETIMEDOUT, nothing survives. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { runTool } from "../../src/tool/exec.ts";
import { MAX_EDIT, MAX_INPUT } from "../../src/tool/fs.ts";
import { type Receipt, receiptLive } from "../../src/sandbox/receipt.ts";
import { cleanup, toolTree, TSH } from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

const PERMS: string[] = JSON.parse(
  Deno.readTextFileSync(new URL("../../src/program/permissions.json", import.meta.url)),
).tsh;

/**
 * True while `pid` is a live (non-zombie) process whose argv starts with `argv0` (pids are
 * reused quickly here, pid_max is 32768: the name guards against counting a stranger).
 */
function alive(pid: number, argv0: string): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const cmd = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z" && cmd.startsWith(argv0 + "\0");
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/** A per-run number for `sleep N`, so concurrent runs of these tests never see each other's. */
const tag = () => 900000 + Math.floor(Math.random() * 99999);

/** Live host processes whose argv is exactly `argv` (found by scanning /proc; nothing is signalled). */
function live(argv: string[]): number[] {
  const want = argv.join("\0") + "\0";
  const found: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (
        Deno.readTextFileSync(`/proc/${e.name}/cmdline`) === want && alive(Number(e.name), argv[0])
      ) {
        found.push(Number(e.name));
      }
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone meanwhile */
    }
  }
  return found;
}

/**
 * Runs tsh as its own process (the permission set of packaging/) on the host tree, under
 * GNU time for its peak RSS. A guard kills it after 60 s so a regression fails instead of hanging.
 */
async function tsh(
  root: string,
  args: string[],
): Promise<{ out: string; maxKb: number; code: number }> {
  const child = new Deno.Command("/usr/bin/time", {
    args: [
      "-f",
      "maxrss=%M",
      Deno.execPath(),
      "run",
      "--quiet",
      ...PERMS,
      TSH,
      "--root",
      root,
      ...args,
    ],
    clearEnv: true,
    env: {
      CTX_AGENT: "coder",
      CTX_HOME: "/ctx/home/0",
      CTX_PATH: "/ctx/tool",
      PATH: "/usr/bin:/bin",
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn(); // deno-fmt-ignore
  const guard = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const o = await child.output();
  clearTimeout(guard);
  const err = new TextDecoder().decode(o.stderr);
  const m = /maxrss=(\d+)/.exec(err);
  assert(m, err);
  return { out: new TextDecoder().decode(o.stdout), maxKb: Number(m[1]), code: o.code };
}

Deno.test("bash -c yes returns with truncated=true, tsh memory stays bounded, and nothing of the tool keeps running", async () => {
  const f = await toolTree();
  try {
    const pids = `${f.ws}/pids`;
    const n = tag();
    // The tool leaves a background sleep in its group and becomes `yes`.
    const r = await tsh(f.root, [
      "--json",
      "--limit",
      "65536",
      "bash",
      `sleep ${n} & echo $! $$ > ${pids}; exec yes`,
    ]);
    const result = JSON.parse(r.out.split("\n")[2]);
    assertEquals({ ...result, content: result.content.length, exitCode: undefined }, {
      type: "tool_result",
      name: "bash",
      status: "error",
      exitCode: undefined,
      content: 65536,
      truncated: true,
    });
    // It did not finish: ended by SIGTERM (143), SIGKILL (137) or EPIPE's SIGPIPE (141).
    assert([137, 141, 143].includes(result.exitCode), String(result.exitCode));
    assertEquals(result.content.slice(0, 6), "y\ny\ny\n");
    const [sleepPid, yesPid] = Deno.readTextFileSync(pids).trim().split(" ").map(Number);
    assertEquals([alive(sleepPid, "sleep"), alive(yesPid, "yes"), live(["sleep", `${n}`])], [
      false,
      false,
      [],
    ]);
    // Memory: the same tsh running a tool that prints one line. `yes` writes gigabytes a second,
    // so an unbounded reader would be far above this after the drain bound alone.
    const base = await tsh(f.root, ["--json", "--limit", "65536", "bash", "echo y"]);
    assert(r.maxKb - base.maxKb < 32 * 1024, `yes: ${r.maxKb} KiB, echo: ${base.maxKb} KiB`);
  } finally {
    await cleanup(f);
  }
});

Deno.test("a tool that outlives --timeout is ETIMEDOUT with its partial output; its whole process group is gone", async () => {
  const f = await toolTree();
  try {
    const pids = `${f.ws}/pids`;
    const n = tag();
    const r = await tsh(f.root, [
      "--json",
      "--timeout",
      "1",
      "bash",
      `sleep ${n} & echo $! $$ > ${pids}; echo started; trap '' TERM; sleep ${n + 1}`,
    ]);
    const result = JSON.parse(r.out.split("\n")[2]);
    assertEquals(result, {
      type: "tool_result",
      name: "bash",
      status: "error",
      errno: "ETIMEDOUT",
      exitCode: 1,
      content:
        'ETIMEDOUT: tool "bash" ran longer than 1 s (the wall-clock bound): its process group was ended\nstarted\n',
      truncated: false,
    });
    assertEquals(r.code, 1);
    const [sleepPid, bashPid] = Deno.readTextFileSync(pids).trim().split(" ").map(Number);
    assertEquals([alive(sleepPid, "sleep"), alive(bashPid, "/bin/bash")], [false, false]);
    assertEquals([live(["sleep", `${n}`]), live(["sleep", `${n + 1}`])], [[], []]);
  } finally {
    await cleanup(f);
  }
});

Deno.test("a tool that exits leaving a background process returns at once; the leftover is ended", async () => {
  const f = await toolTree();
  try {
    const pids = `${f.ws}/pids`;
    const n = tag();
    const r = await tsh(f.root, ["--json", "bash", `sleep ${n} & echo $! > ${pids}; echo done`]);
    const result = JSON.parse(r.out.split("\n")[2]);
    assertEquals(result, {
      type: "tool_result",
      name: "bash",
      status: "ok",
      exitCode: 0,
      content: "done\n",
      truncated: false,
    });
    assertEquals(alive(Number(Deno.readTextFileSync(pids).trim()), "sleep"), false);
    assertEquals(live(["sleep", `${n}`]), []);
  } finally {
    await cleanup(f);
  }
});

Deno.test("in the sandbox: a flood is truncated, a timeout is ETIMEDOUT, and the sandbox init is gone after each", async () => {
  const f = await toolTree();
  try {
    const inits: Receipt[] = [];
    const n = tag();
    const o = {
      root: f.root,
      agent: "coder",
      uid: 0,
      workspace: f.ws,
      limit: 1000,
      timeout: 1,
      onReceipt: (r: Receipt) => inits.push(r),
    };
    const y = await runTsh(["bash", `sleep ${n} & exec yes`], o);
    assertEquals({ ...y, exitCode: [137, 141, 143].includes(y.exitCode) }, {
      name: "bash",
      status: "error",
      exitCode: true,
      content: "y\n".repeat(500),
      truncated: true,
    });
    const t = await runTsh(["bash", `echo started; sleep ${n + 1}`], o);
    assertEquals(t, {
      name: "bash",
      status: "error",
      errno: "ETIMEDOUT",
      exitCode: 1,
      content:
        'ETIMEDOUT: tool "bash" ran longer than 1 s (the wall-clock bound): its process group was ended\nstarted\n',
      truncated: false,
    });
    assertEquals(inits.length, 2);
    // Receipts name pid and start time: a reused pid does not count as the init.
    assertEquals(inits.map(receiptLive), [false, false]);
    assertEquals([live(["sleep", `${n}`]), live(["sleep", `${n + 1}`])], [[], []]);
  } finally {
    await cleanup(f);
  }
});

Deno.test("in-process built-ins are bounded: input size, directory listings, FIFOs, files to edit; runTsh argv", async () => {
  const f = await toolTree();
  try {
    const ctx = {
      root: f.root,
      agent: "coder",
      uid: 0,
      ctxPath: ["/ctx/tool"],
      env: {},
      limit: 1000,
    };
    const big = JSON.stringify({ path: `${f.ws}/big`, content: "x".repeat(MAX_INPUT) });
    const w = await runTool("fs.write", [big], ctx);
    assertEquals([w.errno, w.exitCode], ["E2BIG", 2]);
    assertMatch(w.content, /^E2BIG: tool input is \d+ bytes; the bound is 1048576\n$/);
    assertEquals(Deno.readDirSync(f.ws).some((e) => e.name === "big"), false);
    // A directory of 5000 entries is listed within the bound.
    Deno.mkdirSync(`${f.ws}/many`);
    for (let i = 0; i < 5000; i++) Deno.writeFileSync(`${f.ws}/many/f${i}`, new Uint8Array());
    const l = await runTool("fs.list", [`${f.ws}/many`], ctx);
    assertEquals([l.status, l.truncated], ["ok", true]);
    assert(new TextEncoder().encode(l.content).length <= 1000);
    // A FIFO would block the in-process read: refused instead.
    await new Deno.Command("mkfifo", { args: [`${f.ws}/fifo`] }).output();
    const p = await runTool("fs.read", [`${f.ws}/fifo`], ctx);
    assertEquals(p.content, `EINVAL: ${f.ws}/fifo: fs.read reads regular files only\n`);
    // fs.replace reads a file whole: past MAX_EDIT it refuses and changes nothing.
    const huge = `${f.ws}/huge`;
    Deno.writeFileSync(huge, new Uint8Array(MAX_EDIT + 1).fill(97));
    const e = await runTool("fs.replace", [huge, "a", "b"], ctx);
    assertEquals(
      e.content,
      `EFBIG: ${huge}: file is ${MAX_EDIT + 1} bytes; fs.replace edits at most ${MAX_EDIT}\n`,
    );
    // runTsh refuses an argument the kernel could not exec, before anything starts.
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    const a = await runTsh(["fs.write", "x", "y".repeat(131072)], o);
    assertEquals([a.errno, a.exitCode], ["E2BIG", 2]);
  } finally {
    await cleanup(f);
  }
});
