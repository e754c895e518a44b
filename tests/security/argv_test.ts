/** Issue 8 hole 11: what an agent's tool call says never shows in a host command line, and a view check is no existence oracle for root's files. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { BOUND_MS, type Target, withTarget } from "../fixture/mod.ts";

const NOBODY = 65534;
const USER = 1000;

// An sdk-envelope-v1 agent: its message is a JSON array of tsh words, which step 0 calls (the
// words travel message -> socket -> agent stdin -> tool_call -> tsh stdin, never an argv);
// step 1 answers with the observation it got.
const CALLER = `#!/usr/bin/python3
import json, os, sys
req = json.loads(sys.stdin.readline())
if os.environ.get("CTX_AGENT_STEP") == "0":
    call = {"type": "tool_call", "id": "call-1", "name": "tsh",
            "arguments": {"args": json.loads(req["input"])}}
    print(json.dumps(call))
else:
    obs = req.get("observation") or {}
    print(json.dumps({"type": "message", "role": "assistant",
                      "content": "observed %s" % obs.get("status")}))
`;

// Run as uid 65534 (what any local user may read): scans every /proc/<pid>/cmdline back to back
// until told to stop on stdin (or 60 s), and reports the pids whose command line held the secret
// and whether it saw the marker command line (the proof that it scanned while the tool ran).
const SCANNER = `
import json, os, select, sys, time
secret = sys.stdin.readline().strip().encode()
marker = bytes.fromhex(sys.stdin.readline().strip())
print("scanning", flush=True)
hits, seen, passes, end = {}, False, 0, time.time() + 60
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                c = f.read()
        except OSError:
            continue
        if secret in c:
            hits[p] = c.replace(b"\\0", b" ").decode(errors="replace")[:300]
        if c == marker:
            seen = True
    passes += 1
    if select.select([sys.stdin], [], [], 0)[0]:
        break
print(json.dumps({"hits": hits, "seen": seen, "passes": passes}), flush=True)
`;

interface Scan {
  hits: Record<string, string>;
  seen: boolean;
  passes: number;
}

/** Starts the scanner as nobody; `stop()` ends it (it is our child alone) and returns what it saw. */
async function scanner(secret: string, marker: string): Promise<{ stop(): Promise<Scan> }> {
  const child = new Deno.Command("setpriv", {
    args: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "python3", "-c", SCANNER],
    env: { PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const w = child.stdin.getWriter();
  const hex = [...new TextEncoder().encode(marker)].map((b) => b.toString(16).padStart(2, "0"));
  await w.write(new TextEncoder().encode(`${secret}\n${hex.join("")}\n`));
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  const line = async () => {
    while (!out.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error(`scanner ended early: ${out}`);
      out += value;
    }
    const [first] = out.split("\n", 1);
    out = out.slice(first.length + 1);
    return first;
  };
  const timer = setTimeout(() => child.kill("SIGKILL"), BOUND_MS * 2);
  assertEquals(await line(), "scanning");
  return {
    async stop() {
      try {
        await w.write(new TextEncoder().encode("stop\n"));
        await w.close();
        return JSON.parse(await line()) as Scan;
      } finally {
        clearTimeout(timer);
        await lines.cancel().catch(() => {});
        await child.status;
      }
    },
  };
}

/** A fresh random token. */
const token = () => crypto.randomUUID().replaceAll("-", "");

/** Installs `caller` (root's executable agent) before the daemon starts. */
function addCaller(tree: Target["tree"]): void {
  const prog = `${tree.dir}/caller.py`;
  Deno.writeTextFileSync(prog, CALLER, { mode: 0o755 });
  createAgent(tree.root, "caller", { uid: 0, gid: 0, exec: prog });
}

Deno.test("a tsh bash script and fs.write content never appear in any host /proc/*/cmdline while the call runs", async () => {
  await withTarget(async (t) => {
    const ws = `${t.tree.dir}/ws`;
    Deno.mkdirSync(ws);
    Deno.chmodSync(ws, 0o755);
    const secret = `SECRET-ARG-${token()}`;
    // The marker: the sleep inside the tool, a command line no other process has.
    const pause = `3.${String(Math.floor(Math.random() * 1e6)).padStart(6, "0")}`;
    const scan = await scanner(secret, `sleep\0${pause}\0`);
    let result: Scan;
    try {
      // The secret goes in on ctx's stdin, so no client argv holds it either.
      const script = `sleep ${pause}; echo ${secret}`;
      const ran = await t.ctx(["agent", "send", "caller"], {
        cwd: ws,
        stdin: JSON.stringify(["bash", script]),
      });
      assertEquals(
        { code: ran.code, out: ran.stdout },
        { code: 0, out: "observed ok\n" },
        ran.stderr,
      );
      const wrote = await t.ctx(["agent", "send", "caller"], {
        cwd: ws,
        stdin: JSON.stringify(["fs.write", "/workspace/secret.txt", secret]),
      });
      assertEquals({ code: wrote.code, out: wrote.stdout }, { code: 0, out: "observed ok\n" });
    } finally {
      result = await scan.stop();
    }
    assertEquals(Deno.readTextFileSync(`${ws}/secret.txt`), secret);
    // The tool did run (the run history has the echoed secret) while the scanner scanned.
    assert(result.seen, `the scanner never saw the tool's sleep (${result.passes} passes)`);
    assertEquals(result.hits, {}, "command lines holding the secret");
  }, { setup: addCaller });
});

/** tsh `tools` (a built-in: only the view is checked) for bob, as bob, with --json frames. */
async function viewError(t: Target): Promise<{ code: string; message: string; exit: number }> {
  const ws = `${t.tree.dir}/ws`;
  const r = await t.ctx(["agent", "tsh", "bob", "--json", "--", "fs.list", "/workspace"], {
    uid: USER,
    cwd: ws,
  });
  const frames = r.stdout.trim().split("\n").filter((l) => l.startsWith("{")).map((l) =>
    JSON.parse(l)
  );
  const msg = frames.find((f) => f.type === "message" && f.role === "tool");
  assert(msg, `no tool result: ${r.stdout} ${r.stderr}`);
  const res = msg.content[0];
  return { code: res.errno, message: res.content, exit: r.code };
}

Deno.test("a mount source under /root and one that does not exist are refused alike for a uid-1000 agent (no existence oracle)", async () => {
  const hidden = `/root/ctx-argv-${token()}`;
  Deno.mkdirSync(hidden, { mode: 0o700 });
  try {
    Deno.chmodSync(hidden, 0o700);
    Deno.writeTextFileSync(`${hidden}/f`, "root only\n");
    const absent = `/nonexistent-${token()}`;
    await withTarget(async (t) => {
      const control = `${t.tree.root}/agent/bob.d/mount`;
      const refused: Record<string, { code: string; message: string; exit: number }> = {};
      for (const [what, src] of [["root-only", hidden], ["absent", absent]]) {
        replaceFile(control, `${src}\t/data\tro\t-\n`);
        const e = await viewError(t);
        // The shape: the message with the source named as the control named it.
        refused[what] = { ...e, message: e.message.replaceAll(src, "<source>") };
      }
      console.log(`refusals: ${JSON.stringify(refused)}`);
      assertEquals(refused["root-only"], refused["absent"]);
      assertEquals(refused["absent"].code, "ENOENT");
      // The control itself is fine: a source bob may read binds, and fs.list works.
      replaceFile(control, `${t.tree.dir}/ws\t/data\tro\t-\n`);
      const ok = await t.ctx(["agent", "tsh", "bob", "--", "fs.list", "/data"], {
        uid: USER,
        cwd: `${t.tree.dir}/ws`,
      });
      assertEquals(ok.code, 0, ok.stderr);
    }, {
      setup(tree) {
        createAgent(tree.root, "bob", { uid: USER, gid: USER });
        const d = `${tree.root}/agent/bob.d`;
        const subject = Deno.readTextFileSync(`${d}/label`).trim().split(":")[2];
        const policy = Deno.readTextFileSync(`${d}/policy`);
        replaceFile(`${d}/policy`, policy + `allow ${subject} mount:/data read\n`);
        Deno.mkdirSync(`${tree.dir}/ws`, { mode: 0o755 });
        Deno.chownSync(`${tree.dir}/ws`, USER, USER);
      },
    });
  } finally {
    Deno.removeSync(hidden, { recursive: true });
  }
});
