/** foreignPeer(): a peer in the daemon's mount namespace and root is at home; a gone one is foreign. */
import net from "node:net";
import { assertEquals, assertMatch } from "../../tests/assert.ts";
import { fdOf, peerCred } from "./sock.ts";
import { foreignPeer } from "./foreign.ts";

Deno.test("foreignPeer(): undefined for a child in the daemon's world; a reason once that child is gone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "foreign-" });
  const path = `${dir}/s.sock`;
  let take!: (s: net.Socket) => void; // assigned by the Promise executor below, synchronously
  const accepted = new Promise<net.Socket>((r) => take = r);
  const server = net.createServer({ allowHalfOpen: true }, (s) => take(s));
  await new Promise<void>((r) => server.listen(path, () => r()));
  // The child exits when the server writes one byte.
  const code =
    `const c = await Deno.connect({ transport: "unix", path: ${JSON.stringify(path)} });` +
    `await c.read(new Uint8Array(1));`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", code],
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  const socket = await accepted;
  try {
    const fd = fdOf(socket);
    const { pid } = peerCred(fd);
    assertEquals(foreignPeer(fd, pid), undefined);
    socket.write("x");
    await child.status; // reaped: /proc/<pid> is gone (or names another process)
    assertMatch(
      String(foreignPeer(fd, pid)),
      new RegExp(
        `^(cannot read the mount namespace and root of peer pid ${pid}: ENOENT|` +
          `peer pid ${pid} is gone \\(ESRCH\\)|cannot pin peer pid ${pid} \\(SO_PEERPIDFD: ESRCH\\))$`,
      ),
    );
    assertEquals(foreignPeer(fd, 0), "peer pid 0 is not visible from the daemon's pid namespace");
  } finally {
    socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
    await Deno.remove(dir, { recursive: true });
  }
});
