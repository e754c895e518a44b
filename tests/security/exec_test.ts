/**
 * Issue 8 hole 8: an executable agent made by root runs its step inside the sandbox view, not as
 * root on the host. A real cortexfsd serves the agent (made through the mount, its controls written
 * through the mount); the agent probes what it can reach and reports yes/no per attempt.
 */
import { assert, assertEquals } from "../assert.ts";
import { AGENT_SH, type Target, withTarget } from "../fixture/mod.ts";

/** The probe's `key=value` words. */
type Probe = Record<string, string>;

/** A loopback listener on the host that counts the connections it accepted. */
function listener(): { port: number; accepted(): number; close(): void } {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let n = 0;
  (async () => {
    for await (const c of l) {
      n++;
      c.close();
    }
  })().catch(() => {});
  return { port: l.addr.port, accepted: () => n, close: () => l.close() };
}

/** Makes agent `name` (uid 0: made by root) through the mount, its LOG_DIR inside its own /tmp. */
async function makeAgent(t: Target, name: string, options: { network?: boolean } = {}) {
  const made = await t.ctx(["agent", "new", name, "--exec", AGENT_SH]);
  assertEquals(made.code, 0, made.stderr);
  const d = `${t.tree.mount}/agent/${name}.d`;
  await Deno.writeTextFile(`${d}/env`, "LOG_DIR=/tmp\n");
  if (options.network) {
    const subject = (await Deno.readTextFile(`${d}/label`)).trim().split(":")[2];
    const policy = await Deno.readTextFile(`${d}/policy`);
    await Deno.writeTextFile(`${d}/policy`, policy + `allow ${subject} network:default connect\n`);
  }
  assertEquals(Deno.statSync(`${t.tree.root}/agent/${name}`).uid, 0);
}

/** `ctx agent send NAME probe ...` from `cwd` as root; the probe's words, and the bystander meanwhile. */
async function probe(t: Target, name: string, cwd: string, port: number): Promise<Probe> {
  const secret = `${t.tree.dir}/secret/key`;
  const sock = `${t.tree.run}/agent/${name}.sock`;
  // What the agent must fail to reach does exist on the host (a "no" is about the view).
  assert(Deno.statSync(sock).isSocket, sock);
  assert(Deno.statSync("/etc/shadow").isFile);
  const [out] = await Promise.all([
    t.ctx(["agent", "send", name, `probe ${port} ${secret} ${sock}`], { cwd }),
    t.bystander(), // the mount keeps answering another user while the agent runs
  ]);
  assertEquals(out.code, 0, out.stderr);
  return Object.fromEntries(out.stdout.trim().split(" ").map((w) => w.split("=")));
}

Deno.test("hole 8: a root-made executable agent's step sees only its view: no shadow, no host files, no network, no host pids, no sockets, /ctx read-only; its workspace is the client's cwd, writable", async () => {
  await withTarget(async (t) => {
    await Deno.mkdir(`${t.tree.dir}/secret`, { mode: 0o700 });
    await Deno.writeTextFile(`${t.tree.dir}/secret/key`, "host secret\n", { mode: 0o600 });
    const ws = `${t.tree.dir}/ws`;
    await Deno.mkdir(ws);
    await makeAgent(t, "probe");
    const net = listener();
    try {
      const got = await probe(t, "probe", ws, net.port);
      assertEquals(got, {
        shadow: "no", // /etc/shadow is not in the view
        file: "no", // a root-only host file outside the view
        net: "no", // own network namespace: the host's loopback listener is not there
        sock: "no", // the run dir (agent sockets) is not in the view
        ctxsock: "no", // /ctx/agent/probe.sock leads into that run dir
        ctx: "no", // /ctx is read-only
        remount: "no", // and stays so (no capability to remount)
        ws: "yes", // /workspace is the client's cwd, writable
        procs: got.procs,
        init: "bwrap", // pid 1 is the sandbox's init, not the host's
      });
      // Its own pid namespace: the sandbox init and the agent, where the host has many more.
      const host = [...Deno.readDirSync("/proc")].filter((e) => /^\d+$/.test(e.name)).length;
      assert(Number(got.procs) >= 2 && Number(got.procs) <= 3, `procs=${got.procs}`);
      assert(host > Number(got.procs) + 3, `host pids: ${host}`);
      assertEquals(net.accepted(), 0);
      // What it wrote in /workspace is in the client's cwd on the host, as the agent's uid.
      assertEquals(await Deno.readTextFile(`${ws}/probe.out`), "from-agent\n");
      assertEquals(Deno.statSync(`${ws}/probe.out`).uid, 0);
    } finally {
      net.close();
    }
    await t.bystander();
  });
});

Deno.test("hole 8: policy granting network:default connect makes the host's loopback listener reachable from the step; nothing else of the view widens", async () => {
  await withTarget(async (t) => {
    const ws = `${t.tree.dir}/ws`;
    await Deno.mkdir(ws);
    await makeAgent(t, "netter", { network: true });
    const net = listener();
    try {
      const got = await probe(t, "netter", ws, net.port);
      assertEquals(
        { net: got.net, shadow: got.shadow, sock: got.sock, ctx: got.ctx, init: got.init },
        { net: "yes", shadow: "no", sock: "no", ctx: "no", init: "bwrap" },
      );
      // The connection reached the host listener (accepted a moment later, bounded).
      for (let i = 0; i < 500 && net.accepted() === 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert(net.accepted() >= 1, "the host listener saw no connection");
    } finally {
      net.close();
    }
    await t.bystander();
  });
});
