/** Real bwrap launches: the fd hygiene, the --block-fd receipt gate, doctor. */
import net from "node:net";
import { assert, assertEquals } from "../assert.ts";
import {
  agentEnv,
  doctor,
  gate,
  launch,
  type Receipt,
  receiptLive,
  startTime,
} from "../../src/sandbox/mod.ts";

async function dirs() {
  const base = await Deno.makeTempDir({ prefix: "cortexfs-sbx-test-" });
  await Deno.chmod(base, 0o755);
  for (const d of ["ctx", "ws", "home"]) await Deno.mkdir(`${base}/${d}`);
  return base;
}

function spec(base: string, command: string[]) {
  return {
    ctx: `${base}/ctx`,
    workspace: `${base}/ws`,
    home: `${base}/home`,
    uid: 0,
    gid: 0,
    network: false,
    env: agentEnv({ agent: "coder", subject: "coder_t", uid: 0, ctxPath: ["/ctx/tool"] }),
    command,
  };
}

Deno.test("launch() passes no fd above 2 into the sandbox, even a leaked non-CLOEXEC listener", async () => {
  const base = await dirs();
  // Deno's node:net Unix listener is created without close-on-exec (platform-notes).
  const server = net.createServer();
  await new Promise<void>((ok) => server.listen(`${base}/leak.sock`, ok));
  const file = Deno.openSync(`${base}/ctx/open-file`, { write: true, create: true });
  try {
    const r = await launch(spec(base, ["/bin/bash", "-c", "ls /proc/$$/fd; true"]));
    assertEquals(new TextDecoder().decode(r.stdout), "0\n1\n2\n");
    assertEquals(r.code, 0);
  } finally {
    file.close();
    await new Promise((ok) => server.close(ok));
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("launch() records the sandbox init's pid and start time before the command runs", async () => {
  const base = await dirs();
  try {
    let seen: { receipt: Receipt; ranEarly: boolean; live: boolean } | undefined;
    const r = await launch(spec(base, ["/bin/bash", "-c", "echo ran > /workspace/ran"]), {
      onReceipt(receipt) {
        let ranEarly = true;
        try {
          Deno.statSync(`${base}/ws/ran`);
        } catch {
          ranEarly = false;
        }
        seen = { receipt, ranEarly, live: startTime(receipt.pid) === receipt.start };
      },
    });
    assert(seen);
    assertEquals([seen.ranEarly, seen.live], [false, true]);
    assertEquals(r.receipt, seen.receipt);
    assert(r.receipt.pid !== r.receipt.launcher);
    assertEquals(Deno.readTextFileSync(`${base}/ws/ran`), "ran\n");
    assertEquals(receiptLive(r.receipt), false); // the namespace is gone
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("launch() passes the command's exit code and kills the namespace on abort", async () => {
  const base = await dirs();
  try {
    assertEquals((await launch(spec(base, ["/bin/bash", "-c", "exit 7"]))).code, 7);
    const ac = new AbortController();
    let receipt: Receipt | undefined;
    const p = launch(spec(base, ["/bin/sleep", "30"]), {
      signal: ac.signal,
      onReceipt(r) {
        receipt = r;
        setTimeout(() => ac.abort(), 50);
      },
    });
    const err = await p.then(() => null, (e) => e);
    assertEquals(err?.errno, "ECANCELED");
    assert(receipt && !receiptLive(receipt));
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("doctor() reports that bubblewrap can create user and pid namespaces here", async () => {
  const r = await doctor();
  assertEquals({ ok: r.ok, userns: r.userns, pidns: r.pidns }, {
    ok: true,
    userns: true,
    pidns: true,
  });
  assert(r.bwrap?.startsWith("bubblewrap "));
});

Deno.test("the gate stops when a descriptor it hands over cannot be opened: exit 126, the command never runs", async () => {
  // fd 9999 of this process is not open: its /proc magic link cannot be reopened (as a 0700
  // workspace cannot be by a launcher without the right to read it).
  const out = await new Deno.Command("/bin/bash", {
    args: ["-c", gate([9999]), "cortexfs-gate", "echo", "ran"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assertEquals([out.code, new TextDecoder().decode(out.stdout)], [126, ""], err);
  assert(err.includes(`/proc/${Deno.pid}/fd/9999`), err);
});
