/** Issue 24 items 7, 11, 12: a terminal's socket trusts only the right peers, both ways, and bounds a resize. */
import { assertEquals } from "../assert.ts";
import { FRAME, MAX_COLS, MAX_ROWS, parseSize, sizePayload } from "../../src/abi/terminal.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { tshBundle } from "../../src/tool/bundle.ts";
import {
  asUid,
  BOUND_MS,
  CTX_ARGV,
  events,
  gone,
  makeTree,
  openTempDir,
  PROBES,
  RawClient,
  recordedOutput,
  startTerm,
  stopTerm,
  until,
  withTarget,
} from "../fixture/mod.ts";

/**
 * A fake terminal server as `uid`: each connection is read to its end, then one line with the
 * number of bytes it sent is appended to `<dir>/got` (and it says "ready" once listening).
 */
async function fakeServer(dir: string, uid: number) {
  const code = `
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    with open(sys.argv[2], "a") as f: f.write(f"{n}\\n")
    c.close()
`;
  const [cmd, ...args] = asUid(
    ["/usr/bin/python3", "-c", code, `${dir}/fake.sock`, `${dir}/got`],
    uid,
  );
  const child = new Deno.Command(cmd, { args, stdout: "piped", stderr: "inherit" }).spawn();
  const r = await child.stdout.pipeThrough(new TextDecoderStream()).getReader().read();
  if (!r.value?.includes("ready")) throw new Error("the fake server did not start");
  return {
    socket: `${dir}/fake.sock`,
    got: () => {
      try {
        return Deno.readTextFileSync(`${dir}/got`).trim().split("\n").map(Number);
      } catch {
        return [];
      }
    },
    stop: async () => {
      child.kill("SIGKILL");
      await child.status;
    },
  };
}

Deno.test("item 7: root's ctx agent attach refuses a server of another uid at the alias before sending a byte", async () => {
  const f = await makeTree();
  const fake = await openTempDir("ctx-fake-term-");
  await Deno.chmod(fake, 0o777);
  const srv = await fakeServer(fake, 65534);
  try {
    // The agent's identity is uid 4242: its session's alias is its to point anywhere.
    createAgent(f.root, "a", { uid: 4242, gid: 4242 });
    const term = `${f.root}/home/4242/agent/a/session/s1/terminal`;
    Deno.mkdirSync(term, { recursive: true });
    Deno.symlinkSync(srv.socket, `${term}/main.sock`);
    const o = await new Deno.Command(CTX_ARGV[0], {
      args: [...CTX_ARGV.slice(1), "agent", "attach", "a", "--session", "s1"],
      env: { CTX_ROOT: f.root, XDG_RUNTIME_DIR: `${f.dir}/xdg`, PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(o.stderr);
    // The server saw the connection (it is the one that answered), and got nothing from it.
    await until(() => srv.got().length > 0, "the fake server to log the connection");
    assertEquals(srv.got().reduce((a, b) => a + b, 0), 0, `bytes sent to the fake server (${err})`);
    assertEquals([o.code !== 0, /EACCES/.test(err)], [true, true], err);
  } finally {
    await srv.stop();
    await Deno.remove(fake, { recursive: true }).catch(() => {});
    await Deno.remove(f.dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("item 12: an attacher's 4000x4000 resize is clamped to the stated bound", async () => {
  const t = await startTerm(undefined, { size: "24x80" });
  try {
    const a = await RawClient.open(t.socket, "attach");
    await until(() => a.of(FRAME.snapshot).length === 1, "the attacher's snapshot");
    await a.send(FRAME.resize, sizePayload(4000, 4000));
    await until(() => a.of(FRAME.size).length === 1, "the size frame");
    assertEquals(parseSize(a.of(FRAME.size)[0].payload), { rows: MAX_ROWS, cols: MAX_COLS });
    const r = events(t).events.filter((e) => e.type === "pty.resize") as unknown as {
      rows: number;
      cols: number;
    }[];
    assertEquals(r.map((e) => [e.rows, e.cols]), [[MAX_ROWS, MAX_COLS]]);
    // The program's PTY has the clamped size too.
    await a.input("stty size\r");
    await until(() => a.output().includes(`${MAX_ROWS} ${MAX_COLS}`), "stty size");
    a.close();
  } finally {
    await stopTerm(t);
  }
});

/**
 * A raw client under `wrap` (e.g. `unshare -m`): sends the attach line and an input frame typing
 * `line`, then prints the first frame the server answers (type and payload).
 */
async function firstFrame(wrap: string[], socket: string, line: string) {
  const code = `
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
data = sys.argv[2].encode()
s.sendall(b"attach\\n" + b"i" + struct.pack(">I", len(data)) + data)
def need(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: sys.exit("closed")
        b += c
    return b
t, n = struct.unpack(">cI", need(5))
print(t.decode() + need(n).decode())
`;
  const o = await new Deno.Command(wrap[0], {
    args: [...wrap.slice(1), "/usr/bin/python3", "-c", code, socket, line],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { out: dec.decode(o.stdout), err: dec.decode(o.stderr) };
}

Deno.test("item 11: a peer of the owner's uid in another mount namespace is refused by the terminal", async () => {
  const t = await startTerm(undefined, { size: "24x80" });
  try {
    const mark = `${t.dir}/pwned`;
    const r = await firstFrame(["unshare", "-m"], t.socket, `touch ${mark}\r`);
    assertEquals(r.out[0], "e", `the first frame: ${r.out}${r.err}`);
    assertEquals(JSON.parse(r.out.slice(1)).code, "EACCES");
    // The same client at home is served, and its typing reaches the program.
    const ok = await firstFrame(["env"], t.socket, `echo at-$((6*7))\r`);
    assertEquals(ok.out[0], "h", `the first frame at home: ${ok.out}${ok.err}`);
    await until(() => recordedOutput(t).includes("at-42"), "the home client's command");
    assertEquals(recordedOutput(t).includes("pwned"), false);
    assertEquals(await Deno.stat(mark).then(() => true, () => false), false);
    assertEquals(
      events(t).events.filter((e) => e.type === "client.attach").length,
      1,
      "only the home client was attached",
    );
  } finally {
    await stopTerm(t);
  }
});

Deno.test("item 11: a user-started terminal's socket is out of every sandbox view: another agent's tool of the same uid finds nothing there; the user still attaches", async () => {
  const U = 1000;
  await withTarget(async (t) => {
    // The user's runtime dir in their workspace (a home with XDG_RUNTIME_DIR=~/.run, a cwd of ~).
    const ws = `${t.tree.dir}/ws`, xdg = `${ws}/xdg`;
    await tshBundle(); // built by root: the user cannot write the checkout
    const made = await t.ctx(["terminal", "create", "bob", "--session", "s1"], {
      uid: U,
      cwd: ws,
      env: { XDG_RUNTIME_DIR: xdg },
    });
    assertEquals(made.code, 0, `ctx terminal create as ${U}: ${made.stdout} ${made.stderr}`);
    const [, dir, socket] = made.stdout.trim().split(/\s+/);
    const pid = JSON.parse(Deno.readTextFileSync(`${dir}/meta.json`)).pid;
    try {
      assertEquals(socket, `${xdg}/cortexfs/terminal/bob/s1/main.sock`);
      const inside = `/workspace/xdg/cortexfs/terminal/bob/s1/main.sock`;
      const connect = `import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])`;
      const script = `${PROBES}
can listed test -e ${inside}
can connect python3 -c '${connect}' ${inside}
can runtime ls /workspace/xdg/cortexfs/terminal`;
      const r = await t.ctx(["agent", "tsh", "alice", "--", "bash", script], { uid: U, cwd: ws });
      assertEquals(r.stdout.split("\n").filter((l) => l !== ""), [
        "listed: no",
        "connect: no",
        "runtime: no",
      ], r.stderr);
      await t.bystander();
      // From outside, the user's own client is served.
      const ok = await firstFrame(asUid(["env"], U), socket, `echo outside-ok\r`);
      assertEquals(ok.out[0], "h", `the first frame outside: ${ok.out}${ok.err}`);
      // Its typing reaches the terminal's PTY (echoed into the recording).
      await until(
        () => recordedOutput({ record: dir }).includes("outside-ok"),
        "the user's typing",
        BOUND_MS,
      );
    } finally {
      Deno.kill(pid, "SIGTERM");
      await until(() => gone(pid), "the user's ctxterm to exit", BOUND_MS);
    }
    await t.bystander();
  }, {
    setup(tree) {
      for (const a of ["alice", "bob"]) createAgent(tree.root, a, { uid: U, gid: U });
      Deno.mkdirSync(`${tree.dir}/ws/xdg`, { recursive: true });
      Deno.chmodSync(`${tree.dir}/ws/xdg`, 0o700);
      for (const d of ["ws", "ws/xdg"]) Deno.chownSync(`${tree.dir}/${d}`, U, U);
    },
  });
});
