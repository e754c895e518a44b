/** peerPidfd(), pidfdAlive() and pidfdSignal(): a pidfd pins the connecting process; it reads ESRCH once reaped. */
import net from "node:net";
import { assert, assertEquals } from "../../tests/assert.ts";
import { orphan } from "../../tests/fixture/proc.ts";
import { closeFd, fdOf, peerCred, peerPidfd, pidfdAlive, pidfdSignal } from "./sock.ts";
import { pidfdOpen, waitExits } from "./wait.ts";

const ESRCH = 3;
const SIGTERM = 15;
const SIGKILL = 9;

/** A child process connected to a fresh listener; it exits when the server writes one byte. */
async function connectedChild(): Promise<{
  socket: net.Socket;
  child: Deno.ChildProcess;
  cleanup: () => Promise<void>;
}> {
  const dir = await Deno.makeTempDir({ prefix: "sock-" });
  const path = `${dir}/s.sock`;
  let take!: (s: net.Socket) => void; // assigned by the Promise executor below, synchronously
  const accepted = new Promise<net.Socket>((r) => take = r);
  const server = net.createServer({ allowHalfOpen: true }, (s) => take(s));
  await new Promise<void>((r) => server.listen(path, () => r()));
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
  return {
    socket,
    child,
    cleanup: async () => {
      socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("peerPidfd() gives a pidfd of the connecting process: alive (0) while it runs, -ESRCH once reaped", async () => {
  const { socket, child, cleanup } = await connectedChild();
  try {
    const fd = fdOf(socket);
    assertEquals(peerCred(fd).pid, child.pid);
    const pidfd = peerPidfd(fd);
    assertEquals(pidfd >= 0, true, `SO_PEERPIDFD: ${pidfd}`);
    assertEquals(pidfdAlive(pidfd), 0);
    socket.write("x"); // the child exits; awaiting its status reaps it
    assertEquals((await child.status).success, true);
    assertEquals(pidfdAlive(pidfd), -ESRCH);
    assertEquals(closeFd(pidfd), 0);
  } finally {
    await cleanup();
  }
});

Deno.test("pidfdSignal() signals the pidfd's process: an ignored SIGTERM leaves it, SIGKILL ends it", async () => {
  const o = await orphan({ ignoreTerm: true });
  const fd = pidfdOpen(o.pid); // it is blocked on its read: its pid cannot be reused
  assert(fd >= 0, `pidfd_open(${o.pid}): ${fd}`);
  try {
    assertEquals(pidfdSignal(fd, SIGTERM), 0);
    assertEquals(await waitExits([fd], 0), [fd], "SIGTERM is ignored");
    assertEquals(pidfdSignal(fd, SIGKILL), 0);
    assertEquals(await waitExits([fd], 60_000), []);
  } finally {
    closeFd(fd);
    await o.close();
  }
});
