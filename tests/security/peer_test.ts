/** Issue 8 hole 2: a socket peer outside the daemon's mount namespace or root is refused EACCES. */
import { assertEquals, assertMatch } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import {
  cleanup,
  type Daemon,
  DENO,
  history,
  makeTree,
  startDaemon,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

const CLIENT = new URL("./peer_client.ts", import.meta.url).pathname;

/** What peer_client.ts prints for one connection. */
interface Answer {
  frames: Record<string, unknown>[];
  closed: boolean;
}

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<Answer[]> {
  const out = await new Deno.Command(cmd, {
    args,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${cmd} exited ${out.code}: ${text}${new TextDecoder().decode(out.stderr)}`);
  }
  return text.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

const home = { HOME: Deno.env.get("HOME") ?? "/root" };
const client = (sock: string, frames: unknown[]) => [
  "run",
  "-A",
  "--no-config",
  CLIENT,
  sock,
  ...frames.map((x) => JSON.stringify(x)),
];

/** The client on the host, as the test's own uid (0). */
const onHost = (sock: string, frames: unknown[]) => run(DENO, client(sock, frames), home);

/** The same client inside a real bubblewrap sandbox: every namespace its own, the host fs bound. */
const inSandbox = (sock: string, frames: unknown[]) =>
  run("bwrap", [
    "--bind",
    "/",
    "/",
    "--unshare-all",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--die-with-parent",
    "--",
    DENO,
    ...client(sock, frames),
  ], home);

/** The client on the host as nobody (65534), with a deno cache of its own. */
function asNobody(f: Tree, sock: string, frames: unknown[]) {
  const dir = `${f.dir}/deno-nobody`;
  return run("setpriv", [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    DENO,
    ...client(sock, frames),
  ], { DENO_DIR: dir, HOME: dir });
}

/** Prepares a tree nobody can reach, with agent `mine` owned by nobody. */
async function nobodyTree(): Promise<Tree> {
  const f = await makeTree();
  Deno.chmodSync(f.dir, 0o755);
  Deno.mkdirSync(`${f.dir}/deno-nobody`);
  Deno.chownSync(`${f.dir}/deno-nobody`, 65534, 65534);
  createAgent(f.root, "mine", { uid: 65534, gid: 65534 });
  return f;
}

const statuses = (as: Answer[]) => as.map((a) => [a.frames.at(-1)?.type, a.closed]);

function sessionExists(f: Tree, name: string): boolean {
  try {
    return Deno.statSync(`${f.root}/home/0/agent/coder/session/${name}`).isDirectory;
  } catch {
    return false;
  }
}

/** Asserts each answer is exactly one EACCES frame naming `why`, after which the server closed. */
function assertRefused(as: Answer[], count: number, why: RegExp): void {
  assertEquals(
    as.map((a) => ({ ...a, frames: a.frames.map((x) => ({ ...x, message: "<m>" })) })),
    Array(count).fill({
      frames: [{ type: "error", code: "EACCES", message: "<m>" }],
      closed: true,
    }),
  );
  for (const a of as) assertMatch(String(a.frames[0].message), why);
}

Deno.test("a client in a bubblewrap sandbox (own mount namespace) gets one EACCES frame and a close for send, tsh and resume; nothing is recorded; the same client on the host is served; another uid is served during and after", async () => {
  const f = await nobodyTree();
  const d = await startRuntimeDaemon(f);
  try {
    const sock = `${f.run}/agent/coder.sock`;
    const mine = `${f.run}/agent/mine.sock`;
    // On the host first: the session the sandbox then tries to resume exists and has history.
    const host = await onHost(sock, [
      { op: "send", id: "host-send", session: "host", input: "from the host" },
      { op: "tsh", id: "host-tsh", session: "host", args: ["tools"] },
      { op: "resume", session: "host" },
    ]);
    assertEquals(statuses(host), [["done", false], ["done", false], ["status", false]]);
    assertEquals(host[0].frames.at(-1)?.status, "ok");
    assertEquals(host[2].frames.filter((x) => x.type === "history").length > 0, true);
    const before = history(f, "coder", "host").events;

    const [boxed, during] = await Promise.all([
      inSandbox(sock, [
        { op: "send", id: "box-send", session: "boxed", input: "from the sandbox" },
        { op: "tsh", id: "box-tsh", session: "boxed", args: ["tools"] },
        { op: "resume", session: "host" },
        { op: "send", id: "box-send-2", session: "host", input: "into the host session" },
      ]),
      asNobody(f, mine, [{ op: "send", id: "nobody-1", input: "while boxed" }]),
    ]);
    assertRefused(boxed, 4, /^peer pid \d+ is in mount namespace mnt:\[\d+\], not the daemon's/);
    // Nothing of the sandboxed peer was recorded: no session, nothing added to the host's.
    assertEquals(sessionExists(f, "boxed"), false);
    assertEquals(history(f, "coder", "host").events, before);
    assertEquals(statuses(during), [["done", false]]);
    assertEquals(during[0].frames.at(-1)?.status, "ok");

    const after = await asNobody(f, mine, [{ op: "send", id: "nobody-2", input: "after" }]);
    assertEquals(statuses(after), [["done", false]]);
    const again = await onHost(sock, [{ op: "resume", session: "host" }]);
    assertEquals(statuses(again), [["status", false]]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test({
  name:
    "under a real cortexfsd (a root host: its instance has no sys_ptrace, the host checks each peer for it) a client in a bubblewrap sandbox gets the same one EACCES frame and a close; the same client on the host is served",
  ignore: Deno.uid() !== 0,
  async fn() {
    const f = await makeTree();
    let d: Daemon | null = null;
    try {
      d = await startDaemon(f);
      const sock = `${f.run}/agent/coder.sock`;
      const host = await onHost(sock, [{ op: "send", id: "host-1", session: "host", input: "hi" }]);
      assertEquals(statuses(host), [["done", false]]);
      const boxed = await inSandbox(sock, [
        { op: "send", id: "box-1", session: "boxed", input: "from the sandbox" },
        { op: "tsh", id: "box-2", session: "boxed", args: ["tools"] },
      ]);
      assertRefused(boxed, 2, /^peer pid \d+ is in mount namespace mnt:\[\d+\], not the daemon's/);
      assertEquals(sessionExists(f, "boxed"), false);
    } finally {
      await cleanup(f, d);
    }
  },
});

/** The python3 interpreter, if any (the chroot client needs chroot(2), which Deno lacks). */
const PYTHON = (() => {
  try {
    const out = new Deno.Command("python3", {
      args: ["-c", "import sys; print(sys.executable)"],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    return undefined;
  }
})();

// Connects by a name relative to its cwd (the run's agent dir, opened before the chroot), so it
// is chrooted when it connects and stays in the daemon's mount namespace.
const CHROOTED = `
import json, os, socket, sys
sockdir, name, newroot, frame = sys.argv[1:5]
os.chdir(sockdir)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
os.chroot(newroot)
s.connect(name)
try:
    s.sendall(frame.encode() + b"\\n")
except OSError:
    pass
data, closed = b"", False
while b'"type":"done"' not in data:
    if b'"type":"error"' in data:
        s.settimeout(5)  # a refused peer sees the close at once; a served error stays open
    try:
        b = s.recv(65536)
    except ConnectionResetError:
        b = b""
    except socket.timeout:
        break
    if not b:
        closed = True
        break
    data += b
print(json.dumps({"frames": [json.loads(l) for l in data.splitlines()], "closed": closed}))
`;

Deno.test({
  name:
    "a chrooted client in the daemon's own mount namespace gets EACCES and a close; unchrooted it is served",
  ignore: PYTHON === undefined,
  fn: async () => {
    const f = await makeTree();
    const d = await startRuntimeDaemon(f);
    try {
      const empty = `${f.dir}/empty-root`;
      Deno.mkdirSync(empty);
      const frame = (id: string) =>
        JSON.stringify({ op: "send", id, session: "chroot", input: "from a chroot" });
      const py = PYTHON as string; // the test is ignored when there is no python3
      const jailed = await run(py, [
        "-c",
        CHROOTED,
        `${f.run}/agent`,
        "coder.sock",
        empty,
        frame("c-1"),
      ], home);
      assertRefused(jailed, 1, /^peer pid \d+ has another root directory than the daemon's/);
      assertEquals(sessionExists(f, "chroot"), false);
      // chroot("/") keeps the daemon's root: the same client is served.
      const free = await run(py, [
        "-c",
        CHROOTED,
        `${f.run}/agent`,
        "coder.sock",
        "/",
        frame("c-2"),
      ], home);
      assertEquals(statuses(free), [["done", false]]);
      assertEquals(history(f, "coder", "chroot").events.map((e) => e.client_id ?? null)[0], "c-2");
    } finally {
      await d.stop();
      await cleanup(f);
    }
  },
});
