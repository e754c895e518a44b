/** Issue 8 hole 12: connections over the per-uid cap are closed at once, holding no fd, uncounted. */
import net from "node:net";
import { assertEquals } from "../assert.ts";
import { MAX_CONNS_PER_UID } from "../../src/runtime/server.ts";
import { cleanup, makeTree, Raw, startRuntimeDaemon } from "../fixture/mod.ts";

/** Socket fds the process `pid` has open right now. */
function sockets(pid: number): number {
  let n = 0;
  for (const e of Deno.readDirSync(`/proc/${pid}/fd`)) {
    try {
      if (Deno.readLinkSync(`/proc/${pid}/fd/${e.name}`).startsWith("socket:")) n++;
    } catch { /* closed while listing */ }
  }
  return n;
}

/** A client that never writes, never ends its side (allowHalfOpen) and just watches the stream. */
interface Watcher {
  socket: net.Socket;
  text: string;
  /** Settles with the text received once the server has ended the stream; rejects after `ms`. */
  ended: Promise<string>;
}

function watch(path: string, ms: number): Promise<Watcher> {
  return new Promise((resolve, reject) => {
    // allowHalfOpen: on the server's FIN node must not end our side for us; the test proves the
    // server closes without any help from the client.
    const socket = net.connect({ path, allowHalfOpen: true });
    socket.once("error", reject);
    socket.once("connect", () => {
      const w: Watcher = { socket, text: "", ended: Promise.resolve("") };
      socket.setEncoding("utf8");
      socket.on("data", (d: string) => w.text += d);
      w.ended = new Promise((ok, fail) => {
        const t = setTimeout(() => fail(new Error(`no close within ${ms} ms: ${w.text}`)), ms);
        socket.once("end", () => {
          clearTimeout(t);
          ok(w.text);
        });
      });
      resolve(w);
    });
  });
}

Deno.test("connections over MAX_CONNS_PER_UID get one EBUSY frame and are closed by the server at once: no daemon fd held, none counted", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  const held: Raw[] = [];
  const extra: Watcher[] = [];
  try {
    const sock = `${f.root}/agent/coder.sock`;
    for (let i = 0; i < MAX_CONNS_PER_UID; i++) {
      const c = await Raw.connect(sock);
      c.write({ op: "resume", session: "none" });
      await c.until((fs) => fs.length === 1, { boundMs: 10_000 }); // admitted and answered
      held.push(c);
    }
    // The process serving the connections: coder's instance.
    const pid = d.instancePid("coder")!;
    const base = sockets(pid);
    for (let i = 0; i < 16; i++) extra.push(await watch(sock, 5_000));
    const texts = await Promise.all(extra.map((w) => w.ended));
    // Counted the moment every refused client has seen the close, and they still hold theirs.
    const now = sockets(pid);
    assertEquals(
      texts.map((t) => t.split("\n").filter(Boolean).map((l) => JSON.parse(l).code)),
      Array(16).fill(["EBUSY"]),
    );
    assertEquals(extra.map((w) => w.socket.destroyed), Array(16).fill(false));
    assertEquals(now, base, "the daemon still holds sockets of refused connections");

    // The refused ones took no slot: with one held connection gone exactly one more is admitted.
    held.pop()?.close();
    let admitted: Raw | undefined;
    for (let i = 0; i < 200 && !admitted; i++) {
      const c = await Raw.connect(sock);
      c.write({ op: "resume", session: "none" });
      const [fr] = await c.until((fs) => fs.length === 1, { boundMs: 10_000 });
      if (fr.code === "ENOENT") admitted = c;
      else c.close(); // EBUSY until the daemon has seen the close of the popped one
    }
    assertEquals(admitted !== undefined, true, "the freed slot was never reusable");
    held.push(admitted as Raw);
    const over = await watch(sock, 5_000);
    extra.push(over);
    assertEquals(JSON.parse((await over.ended).trim()).code, "EBUSY");
  } finally {
    for (const w of extra) w.socket.destroy();
    for (const c of held) c.close();
    await d.stop();
    await cleanup(f);
  }
});
