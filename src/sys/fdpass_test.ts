/** sendMsg()/recvMsg() pass fds over a seqpacket pair and report cut messages; recvFd() takes fusermount3's one fd; unixName() and boundFile() tell an accepted connection from sockets made otherwise. */
import net from "node:net";
import { assert, assertEquals, assertNotEquals } from "../../tests/assert.ts";
import {
  boundFile,
  isSeqpacket,
  notUnixStream,
  recvFd,
  recvMsg,
  sendMsg,
  seqpacketPair,
  unixName,
} from "./fdpass.ts";
import { fstat, socketpair } from "./libc.ts";
import { closeFd, listenUnix } from "./listen.ts";
import { fdOf, isCloexec } from "./sock.ts";
import { ignore } from "../abi/errno.ts";

const enc = new TextEncoder();

Deno.test("sendMsg()/recvMsg(): one message with one fd arrives whole (the fd close-on-exec, the same file); a longer one is cut and says so; nothing waiting is EAGAIN", () => {
  const p = seqpacketPair();
  assert(typeof p !== "number");
  const [a, b] = p;
  try {
    assertEquals([isSeqpacket(a), isSeqpacket(b)], [true, true]);
    assertEquals(sendMsg(a, enc.encode("hello"), b), 5);
    const m = recvMsg(b, 16);
    assert(typeof m !== "number");
    assertEquals([new TextDecoder().decode(m.data), m.fds.length, m.truncated], [
      "hello",
      1,
      false,
    ]);
    const [x, y] = [fstat(m.fds[0]), fstat(b)].map((s) => typeof s === "number" ? s : s.ino);
    assertEquals([x, isCloexec(m.fds[0])], [y, true]);
    closeFd(m.fds[0]);
    assertEquals(sendMsg(a, enc.encode("0123456789")), 10);
    const cut = recvMsg(b, 4);
    assertEquals(cut, { data: enc.encode("0123"), fds: [], truncated: true });
    assertEquals(recvMsg(b, 4), -11); // EAGAIN
  } finally {
    closeFd(a);
    closeFd(b);
  }
});

Deno.test("recvFd() waits for a message on a stream socket and returns its first fd (close-on-exec), closing the others; a peer gone without an fd is EIO", async () => {
  const p = socketpair(); // not close-on-exec: the sender inherits its end, as fusermount3 does
  assert(typeof p !== "number");
  const [a, b] = p;
  try {
    // Sends only after a while: recvFd must wait (never waiting, it would answer EAGAIN). The two
    // fds after the first are files of this test's own: no other test (they share this process
    // under --parallel) can have them open, so finding none of them open afterwards is exact.
    const dir = Deno.makeTempDirSync({ prefix: "recvfd-" });
    const extra = [`${dir}/x1`, `${dir}/x2`];
    const code = `import os, socket, time\ns = socket.socket(fileno=${b})\ntime.sleep(0.3)\n` +
      `fds = [0] + [os.open(p, os.O_CREAT | os.O_RDONLY) for p in ${JSON.stringify(extra)}]\n` +
      `socket.send_fds(s, [b"\\0"], fds)`;
    const child = new Deno.Command("python3", {
      args: ["-c", code],
      stdin: "null",
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    const fd = recvFd(a);
    assert(fd >= 0, `errno ${-fd}`);
    const links = [...Deno.readDirSync("/proc/self/fd")].flatMap((e) => {
      try {
        return [Deno.readLinkSync(`/proc/self/fd/${e.name}`)];
      } catch (e) {
        ignore(e, Deno.errors.NotFound);
        return []; // closed meanwhile (another test's fd)
      }
    });
    assertEquals([Deno.readLinkSync(`/proc/self/fd/${fd}`), isCloexec(fd)], ["/dev/null", true]);
    assertEquals(links.filter((l) => extra.includes(l)), [], "the fds after the first are closed");
    Deno.removeSync(dir, { recursive: true });
    closeFd(fd);
    assertEquals((await child.status).code, 0);
    closeFd(b);
    assertEquals(recvFd(a), -5); // EIO: the peer closed, no fd came
  } finally {
    closeFd(a);
  }
});

/** A listener our listenUnix made at `<temp dir>/s.sock`, served by node:net; its first connection. */
async function listening() {
  const dir = await Deno.makeTempDir({ prefix: "fdpass-" });
  const path = `${dir}/s.sock`;
  const listener = listenUnix(path);
  assert(listener >= 0);
  let take!: (s: net.Socket) => void; // assigned by the Promise executor below, synchronously
  const accepted = new Promise<net.Socket>((r) => take = r);
  const server = net.createServer((s) => take(s));
  await new Promise<void>((r) => server.listen({ fd: listener }, () => r()));
  return { dir, path, listener, accepted, server };
}

Deno.test("notUnixStream(), unixName(), boundFile(): an accepted connection is a named stream socket bound to its listener's file; a client and a socketpair are unnamed, bound to none", async () => {
  const { dir, path, listener, accepted, server } = await listening();
  const client = net.connect(path);
  const s = await accepted;
  try {
    const fd = fdOf(s);
    const file = Deno.statSync(path);
    assertEquals(notUnixStream(fd), undefined);
    assertEquals(notUnixStream(listener), "a listening socket, not a connection");
    assertEquals(unixName(fd), path);
    assertEquals(boundFile(fd), boundFile(listener));
    assertEquals((boundFile(fd) as { ino: number }).ino, file.ino);
    assertEquals([unixName(fdOf(client)), boundFile(fdOf(client))], ["", null]);
    const p = seqpacketPair();
    assert(typeof p !== "number");
    assertEquals([notUnixStream(p[0]), unixName(p[0]), boundFile(p[0])], [
      "not a stream socket (type 5)",
      "",
      null,
    ]);
    closeFd(p[0]);
    closeFd(p[1]);
  } finally {
    client.destroy();
    s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "boundFile(): a connection from a client in another network namespace (sock_diag finds it only there) is bound to its listener's file all the same",
  ignore: Deno.uid() !== 0,
  async fn() {
    const { dir, path, listener, accepted, server } = await listening();
    const code =
      `const c = await Deno.connect({ transport: "unix", path: ${JSON.stringify(path)} });` +
      `await c.read(new Uint8Array(1));`;
    const child = new Deno.Command("unshare", {
      args: ["--net", "--", Deno.execPath(), "eval", code],
      stdin: "null",
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    const s = await accepted;
    try {
      const ns = (pid: number) => Deno.readLinkSync(`/proc/${pid}/ns/net`);
      assertNotEquals(ns(child.pid), ns(Deno.pid)); // unshare execs deno in place: the same pid
      assertEquals(boundFile(fdOf(s)), boundFile(listener));
    } finally {
      s.end("x");
      await child.status;
      await new Promise<void>((r) => server.close(() => r()));
      await Deno.remove(dir, { recursive: true });
    }
  },
});
