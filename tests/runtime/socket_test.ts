/** Rule 1: one socket per agent with its tree alias, SO_PEERCRED authority, frame validation, no fd leaks. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import {
  addTestAgent,
  cleanup,
  ctx,
  DENO,
  makeTree,
  PEER,
  Raw,
  sh,
  startRuntimeDaemon,
} from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

Deno.test("every agent gets <run>/agent/<name>.sock, aliased at agent/<name>.sock", async () => {
  const f = await makeTree();
  addTestAgent(f, "t1");
  const d = await startRuntimeDaemon(f);
  try {
    assertEquals(d.agents(), ["coder", "t1"]);
    for (const a of ["coder", "t1"]) {
      const sock = `${f.run}/agent/${a}.sock`;
      const st = Deno.lstatSync(sock);
      assert(st.isSocket);
      assertEquals(st.mode! & 0o777, 0o666);
      assertEquals(Deno.readLinkSync(`${f.root}/agent/${a}.sock`), sock);
    }
    const out = await ctx(f, ["agent", "send", "coder", "through", "the", "alias"]);
    assertEquals(out, { code: 0, stdout: "through the alias\n", stderr: "" });
    // Sockets are reachable by name but not listable; receipts and the run index are root's
    // (coder's instance, started by the send above, made its own index).
    const mode = (p: string) => Deno.statSync(`${f.run}/${p}`).mode! & 0o777;
    const index = [
      "index",
      "index/coder.sqlite",
      "index/coder.sqlite-wal",
      "index/coder.sqlite-shm",
    ];
    assertEquals(
      ["agent", "temp", "groups", ...index].map(mode),
      [0o711, 0o711, 0o700, 0o700, 0o600, 0o600, 0o600],
    );
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("unknown ops, bad JSON, schema errors and oversized frames get error frames; the connection keeps serving", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    const c = await Raw.connect(`${f.root}/agent/coder.sock`);
    c.write({ op: "launch", id: "x" });
    c.write("{not json\n");
    c.write({ op: "send", id: "a b", input: "x" });
    c.write({ op: "send", id: "ok-1", input: 5 });
    c.write({ op: "approve", run: "r", id: "c", decision: "allow_once" });
    c.write(new Uint8Array([0xff, 0xfe, 0x0a]));
    c.write("x".repeat(1024 * 1024 + 10) + "\n");
    c.write({ op: "send", id: "ok-2", input: "still here" });
    const frames = await c.until((fs) => fs.some((x) => x.type === "done"));
    const errors = frames.filter((x) => x.type === "error").map((x) => [x.code, x.id ?? null]);
    assertEquals(errors, [
      ["EINVAL", "x"],
      ["EINVAL", null],
      ["EINVAL", "a b"],
      ["EINVAL", "ok-1"],
      ["EINVAL", null],
      ["EINVAL", null],
      ["EMSGSIZE", null],
    ]);
    assertEquals(frames.find((x) => x.type === "message")?.content, [{
      type: "text",
      text: "still here",
    }]);
    c.close();
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("SO_PEERCRED: the owner uid and uid 0 are served, any other uid gets EACCES", async () => {
  const f = await makeTree();
  // The nobody user needs to reach the socket and to run deno with a cache of its own.
  Deno.chmodSync(f.dir, 0o755);
  const denoDir = `${f.dir}/deno-nobody`;
  Deno.mkdirSync(denoDir);
  Deno.chownSync(denoDir, 65534, 65534);
  createAgent(f.root, "mine", { uid: 65534, gid: 65534 });
  const d = await startRuntimeDaemon(f);
  const asNobody = async (agent: string) => {
    const out = await new Deno.Command("setpriv", {
      args: [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        DENO,
        "run",
        "-A",
        "--no-config",
        PEER,
        `${f.root}/agent/${agent}.sock`,
        JSON.stringify({ op: "send", id: "p-1", input: "hi nobody" }),
      ],
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", DENO_DIR: denoDir, HOME: denoDir, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n").filter(Boolean);
    return lines.map((l) => JSON.parse(l));
  };
  try {
    const denied = await asNobody("coder");
    assertEquals(denied.map((x) => [x.type, x.code]), [["error", "EACCES"]]);
    const served = await asNobody("mine");
    assertEquals(served.at(-1)?.type, "done");
    assertEquals(served.at(-1)?.status, "ok");
    // Root (uid 0) may use the agent nobody owns.
    const root = await ctx(f, ["agent", "send", "mine", "root", "may"]);
    assertEquals(root.stdout, "root may\n");
    // No run was started for the refused peer.
    assertEquals(
      (() => {
        try {
          return Deno.readDirSync(`${f.root}/home/0/agent/coder/session`).toArray().length;
        } catch (e) {
          ignore(e, Deno.errors.NotFound);
          return 0;
        }
      })(),
      0,
    );
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("listener and connection fds are close-on-exec: an agent process holds no socket", async () => {
  const f = await makeTree();
  addTestAgent(f, "fds");
  // A tiny agent that reports its open fds (bash keeps 255 for the script).
  const prog = `${f.dir}/fds.sh`;
  Deno.writeTextFileSync(
    prog,
    `#!/bin/bash\nread -r line\nfds=$(for x in /proc/$$/fd/*; do readlink "$x"; done | tr '\\n' ' ')\nprintf '{"type":"message","role":"assistant","content":"%s"}\\n' "$fds"\n`,
  );
  Deno.chmodSync(prog, 0o755);
  Deno.copyFileSync(prog, `${f.root}/agent/fds`);
  const d = await startRuntimeDaemon(f);
  try {
    const out = await ctx(f, ["agent", "send", "fds", "list"]);
    assertEquals(out.code, 0);
    assert(!out.stdout.includes("socket:"), `an fd leaked into the agent: ${out.stdout}`);
    assert(out.stdout.includes("pipe:"), out.stdout);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("an agent created while the runtime runs is served at once through the mount's create path (no watcher)", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    assertEquals(d.agents(), ["coder"]);
    createAgent(f.root, "late", { uid: 0, gid: 0 });
    replaceFile(`${f.root}/agent/late.d/approval`, "auto\n");
    // Nothing is served until the create path calls back: there is no polling.
    assertEquals(d.agents(), ["coder"]);
    // The create path: a staged entry renamed onto agent/late through the mount.
    const staged = `${f.mount}/agent/.late.tmp-1-a`;
    const put = await sh(`cp ${f.root}/agent/late ${staged} && mv ${staged} ${f.mount}/agent/late`);
    assertEquals(put.code, 0, put.stderr);
    const path = `${f.run}/agent/late.sock`;
    assert(Deno.lstatSync(path).isSocket);
    assertEquals(d.agents(), ["coder", "late"]);
    const out = await ctx(f, ["agent", "send", "late", "hello", "late"]);
    assertEquals(out, { code: 0, stdout: "hello late\n", stderr: "" });
    // Removing the definition stops the socket and drops its alias; the session stays.
    const rm = await sh(`rm ${f.mount}/agent/late`);
    assertEquals(rm.code, 0, rm.stderr);
    assertEquals(d.agents(), ["coder"]);
    const gone = (p: string) => {
      try {
        Deno.lstatSync(p);
        return false;
      } catch (e) {
        return e instanceof Deno.errors.NotFound;
      }
    };
    assertEquals([gone(path), gone(`${f.root}/agent/late.sock`)], [true, true]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
