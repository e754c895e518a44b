/** The host's broker against an instance's channel on a real socketpair: a connection accepted on the agent's own socket gets its peer's cwd; anything else the instance could hand over is refused; a peer gone before the check is refused; the protocol's bounds close the channel. */
import net from "node:net";
import { assert, assertEquals, assertMatch } from "../../tests/assert.ts";
import { recvMsg, sendMsg, seqpacketPair } from "../sys/fdpass.ts";
import { cstr, fstat, O, open, socketpair } from "../sys/libc.ts";
import { closeFd, listenUnix, pollReadable, Wake } from "../sys/listen.ts";
import { fdOf } from "../sys/sock.ts";
import { Broker } from "./broker.ts";
import { HostChannel, MAX_PENDING } from "../runtime/channel.ts";
import type { Workspace } from "../runtime/peer.ts";
import { createAgent } from "../store/agent_new.ts";
import { type Claim, claimsOf } from "../store/session/claim.ts";
import { cleanup, makeTree } from "../../tests/fixture/mod.ts";
import { ignore } from "../abi/errno.ts";

const NOBODY = 65534;

const enc = new TextEncoder();

/** A listener made as the host makes it, served as an instance serves it (node:net on its fd). */
async function agentSocket(dir: string) {
  const path = `${dir}/a.sock`;
  const listener = listenUnix(path);
  assert(listener >= 0, `listenUnix: ${listener}`);
  const queue: net.Socket[] = [];
  const waiters: ((s: net.Socket) => void)[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    const w = waiters.shift();
    if (w) w(s);
    else queue.push(s);
  });
  await new Promise<void>((r) => server.listen({ fd: listener }, () => r()));
  const next = () =>
    new Promise<net.Socket>((r) => {
      const s = queue.shift();
      if (s) r(s);
      else waiters.push(r);
    });
  return { path, listener, server, next };
}

/** A child in `cwd` connected to `path`; it exits once it reads one byte (or EOF). */
function child(path: string, cwd: string): Deno.ChildProcess {
  const code =
    `const c = await Deno.connect({ transport: "unix", path: ${JSON.stringify(path)} });` +
    `await c.read(new Uint8Array(1));`;
  return new Deno.Command(Deno.execPath(), {
    args: ["eval", code],
    cwd,
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
}

/** A broker and an instance's channel on the two ends of a fresh socketpair. */
function pair(o: { path: string; listener: number }) {
  const p = seqpacketPair();
  if (typeof p === "number") throw new Error(`socketpair: ${p}`);
  const broker = new Broker(p[0], { agent: "a", root: "/nonexistent", run: "/nonexistent", ...o });
  return { broker, channel: new HostChannel(p[1]) };
}

function refusal(w: Workspace): string {
  if ("fd" in w) {
    closeFd(w.fd);
    return "a workspace";
  }
  return `${w.code}: ${w.message}`;
}

Deno.test("Broker: a connection accepted on the agent's socket gets its peer's cwd (an O_PATH fd of that very directory); the fd handed over is the instance's still", async () => {
  const dir = await Deno.makeTempDir({ prefix: "broker-" });
  const a = await agentSocket(dir);
  const { broker, channel } = pair(a);
  const cwd = `${dir}/cwd`;
  Deno.mkdirSync(cwd);
  const c = child(a.path, cwd);
  const s = await a.next();
  try {
    const w = await channel.peer(fdOf(s));
    if (!("fd" in w)) throw new Error(refusal(w));
    const st = fstat(w.fd);
    assert(typeof st !== "number", `fstat: ${st}`);
    assertEquals([st.ino, st.dev], [Deno.statSync(cwd).ino, Deno.statSync(cwd).dev]);
    closeFd(w.fd);
    // The broker closed its copy only.
    assertEquals(typeof fstat(fdOf(s)), "object");
  } finally {
    s.end("x");
    await c.status;
    await channel.close();
    await broker.done;
    await new Promise<void>((r) => a.server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Broker: refuses every fd that is not a connection to the agent's own socket: a socketpair, a file, the listener, another agent's connection, one to a socket bound anew at the same path", async () => {
  const dir = await Deno.makeTempDir({ prefix: "broker-" });
  const a = await agentSocket(dir);
  const other = await agentSocket(await Deno.makeTempDir({ dir, prefix: "b-" }));
  const { broker, channel } = pair(a);
  const kids: Deno.ChildProcess[] = [];
  const socks: net.Socket[] = [];
  const servers: net.Server[] = [];
  try {
    // The instance's own stream socketpair: connected, AF_UNIX, stream, but named by nothing.
    const sp = socketpair();
    assert(typeof sp !== "number");
    Deno.writeTextFileSync(`${dir}/f`, "");
    const file = open(cstr(`${dir}/f`), O.RDONLY);
    assert(file >= 0, `open: ${file}`);
    kids.push(child(other.path, dir));
    socks.push(await other.next());
    // The agent's path, unlinked and bound anew: the same name, another file.
    Deno.renameSync(a.path, `${dir}/moved.sock`);
    const rebound = await agentSocket(dir);
    servers.push(rebound.server);
    kids.push(child(rebound.path, dir));
    socks.push(await rebound.next());
    const got = {
      socketpair: refusal(await channel.peer(sp[0])),
      file: refusal(await channel.peer(file)),
      listener: refusal(await channel.peer(a.listener)),
      other: refusal(await channel.peer(fdOf(socks[0]))),
      rebound: refusal(await channel.peer(fdOf(socks[1]))),
    };
    const refused = "EACCES: the host refuses the fd: not a connection to agent a's socket: ";
    assertEquals(
      got.socketpair,
      `${refused}its local address is "", not ${JSON.stringify(a.path)}`,
    );
    assertEquals(got.file, `${refused}not a socket`);
    assertEquals(got.listener, `${refused}a listening socket, not a connection`);
    assertEquals(
      got.other,
      `${refused}its local address is ${JSON.stringify(other.path)}, not ${JSON.stringify(a.path)}`,
    );
    assertMatch(
      got.rebound,
      new RegExp(
        `^${refused}it is bound to another file \\(inode \\d+\\) than the listener \\(inode \\d+\\)$`,
      ),
    );
    closeFd(file);
    closeFd(sp[0]);
    closeFd(sp[1]);
  } finally {
    for (const s of socks) s.end("x");
    for (const k of kids) await k.status;
    for (const server of servers) await new Promise<void>((r) => server.close(() => r()));
    await channel.close();
    await broker.done;
    await new Promise<void>((r) => a.server.close(() => r()));
    await new Promise<void>((r) => other.server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Broker: a peer that exits between its connect and the check is refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "broker-" });
  const a = await agentSocket(dir);
  const { broker, channel } = pair(a);
  const c = child(a.path, dir);
  const s = await a.next();
  try {
    const { pid } = c;
    s.write("x");
    await c.status; // reaped: its pidfd reads ESRCH, /proc/<pid> is gone or another process
    const got = refusal(await channel.peer(fdOf(s)));
    assertMatch(
      got,
      new RegExp(
        `^EACCES: (cannot read the mount namespace and root of peer pid ${pid}: ENOENT|` +
          `peer pid ${pid} is gone( \\(ESRCH\\))?|` +
          `cannot pin peer pid ${pid} \\(SO_PEERPIDFD: ESRCH\\))$`,
      ),
    );
  } finally {
    s.destroy();
    await channel.close();
    await broker.done;
    await new Promise<void>((r) => a.server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Broker: a request without its one fd is refused EINVAL (the channel stays); a message outside the protocol ends the channel and every fd it carried is closed; a channel whose host is gone answers EIO", async () => {
  const dir = await Deno.makeTempDir({ prefix: "broker-" });
  const a = await agentSocket(dir);
  const p = seqpacketPair();
  assert(typeof p !== "number");
  const [host, inst] = p;
  const broker = new Broker(host, {
    agent: "a",
    path: a.path,
    listener: a.listener,
    root: dir,
    run: dir,
  });
  const wake = new Wake();
  const answer = async () => {
    await pollReadable([inst], wake);
    const m = recvMsg(inst, 1024);
    assert(typeof m !== "number", `recvmsg: ${m}`);
    return { text: new TextDecoder().decode(m.data), fds: m.fds.length };
  };
  try {
    assertEquals(sendMsg(inst, enc.encode(JSON.stringify({ op: "peer", id: 7 }))) > 0, true);
    assertEquals(await answer(), {
      text: JSON.stringify({
        id: 7,
        ok: false,
        code: "EINVAL",
        message: "a peer request carries exactly one fd, not 0",
      }),
      fds: 0,
    });
    // Garbage with an fd: the broker closes the fd and its end of the channel.
    const sp = seqpacketPair();
    assert(typeof sp !== "number");
    assertEquals(sendMsg(inst, enc.encode("not json"), sp[0]) > 0, true);
    closeFd(sp[0]);
    await broker.done;
    assertEquals(await answer(), { text: "", fds: 0 }); // EOF: the host's end is closed
    // The fd it carried was closed too: its peer end reads EOF.
    await pollReadable([sp[1]], wake);
    const eof = recvMsg(sp[1], 16);
    assertEquals(typeof eof !== "number" && eof.data.length, 0);
    closeFd(sp[1]);
    // The instance's side of a channel whose host is gone fails at once, never waits.
    const channel = new HostChannel(inst);
    assertEquals(
      refusal(await channel.peer(a.listener)),
      "EIO: the host does not answer: cannot ask it (EPIPE)",
    );
    await channel.close();
  } finally {
    wake.close();
    await new Promise<void>((r) => a.server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "Broker: a claim of the agent's own (its home for its uid:gid) is run by the host (made, given to the uid); any other claim is refused EACCES and nothing is made",
  ignore: Deno.uid() !== 0,
  async fn() {
    const tree = await makeTree();
    createAgent(tree.root, "n", { uid: NOBODY, gid: NOBODY });
    Deno.removeSync(`${tree.root}/home/${NOBODY}`, { recursive: true });
    const p = seqpacketPair();
    assert(typeof p !== "number");
    const o = { agent: "n", root: tree.root, run: tree.run, path: "/nonexistent", listener: -1 };
    const broker = new Broker(p[0], o);
    const inst = p[1];
    const wake = new Wake();
    // As the instance's claimSync asks (it waits on its own thread: the host is another process
    // there; here the broker shares this thread, so the answer is awaited instead).
    let id = 0;
    const ask = async (c: Claim) => {
      assertEquals(
        sendMsg(inst, enc.encode(JSON.stringify({ op: "claim", id: ++id, ...c }))) > 0,
        true,
      );
      await pollReadable([inst], wake);
      const m = recvMsg(inst, 1024);
      assert(typeof m !== "number" && m.fds.length === 0);
      const a = JSON.parse(new TextDecoder().decode(m.data));
      return a.ok ? "ok" : `${a.code}: ${a.message}`;
    };
    try {
      // The very claim the instance's ensureAgentHome makes (claimsOf lists it last).
      const home = claimsOf({
        root: tree.root,
        run: tree.run,
        agent: "n",
        uid: NOBODY,
        gid: NOBODY,
      })
        .at(-1) as Claim;
      assertEquals(home.claim, `home/${NOBODY}`);
      // Another uid's home, and a root-only directory outside the tree: refused, nothing made.
      const other = { ...home, claim: "home/1234", uid: 1234, gid: 1234 };
      const outside = { ...home, trust: tree.dir, claim: "elsewhere" };
      const answers = {
        home: await ask(home),
        other: await ask(other),
        outside: await ask(outside),
      };
      const refuse = (c: Claim) =>
        `EACCES: the host refuses to claim ${c.trust}/${c.claim} for ${c.uid}:${c.gid}: ` +
        `not a claim of agent n (uid ${NOBODY}, gid ${NOBODY})`;
      assertEquals(answers, { home: "ok", other: refuse(other), outside: refuse(outside) });
      const st = Deno.lstatSync(`${tree.root}/home/${NOBODY}`);
      assertEquals([st.isDirectory, st.uid, st.gid, (st.mode ?? 0) & 0o7777], [
        true,
        NOBODY,
        NOBODY,
        0o700,
      ]);
      assertEquals(
        [`${tree.root}/home/1234`, `${tree.dir}/elsewhere`].map((d) => {
          try {
            Deno.lstatSync(d);
            return true;
          } catch (e) {
            ignore(e, Deno.errors.NotFound);
            return false;
          }
        }),
        [false, false],
      );
    } finally {
      closeFd(inst);
      await broker.done;
      wake.close();
      await cleanup(tree);
    }
  },
});

Deno.test("HostChannel: a host that does not answer blocks nothing: requests past MAX_PENDING are refused EAGAIN at once, and when the host goes every waiting one is refused EIO", async () => {
  const p = seqpacketPair();
  assert(typeof p !== "number");
  const [host, inst] = p;
  const channel = new HostChannel(inst);
  const sp = socketpair(); // any fd will do: nobody reads the requests
  assert(typeof sp !== "number");
  try {
    const waiting = Array.from({ length: MAX_PENDING }, () => channel.peer(sp[0]));
    assertEquals(
      refusal(await channel.peer(sp[0])),
      `EAGAIN: ${MAX_PENDING} connections already wait for the host's check; connect again`,
    );
    closeFd(host); // the host is gone: its end closes, every fd it had queued with it
    const answers = new Set((await Promise.all(waiting)).map(refusal));
    assertEquals([...answers], ["EIO: the host does not answer: it is gone"]);
  } finally {
    await channel.close();
    closeFd(sp[0]);
    closeFd(sp[1]);
  }
});
