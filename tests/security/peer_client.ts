/** A bare socket client (Deno.connect only, so it runs sandboxed or as nobody): a connection per frame. */
// Usage: peer_client.ts SOCKET FRAME... ; prints one JSON line per frame:
// {"frames":[...],"closed":bool} where closed means the server ended the stream (EOF or reset)
// before the request's last frame was seen.

const [path, ...requests] = Deno.args;
const enc = new TextEncoder();
const dec = new TextDecoder();

// A frame that ends a request: a run's done, resume's status, or any error without a run.
function last(f: { type?: string; run?: unknown }): boolean {
  return f.type === "done" || f.type === "status" || (f.type === "error" && f.run === undefined);
}

// Bounded: a server that neither answers nor closes fails the caller instead of hanging it.
const bound = setTimeout(() => {
  console.error("peer_client: no answer within 30 s");
  Deno.exit(3);
}, 30_000);

for (const req of requests) {
  const c = await Deno.connect({ transport: "unix", path });
  try {
    // The server may already have answered and closed (a refused peer): EPIPE here is fine, the
    // answer still waits in our receive queue.
    await c.write(enc.encode(req + "\n"));
  } catch { /* read the answer anyway */ }
  const frames: Record<string, unknown>[] = [];
  let buf = "", closed = false, done = false;
  const chunk = new Uint8Array(65536);
  while (!done) {
    let n: number | null;
    try {
      n = await c.read(chunk);
    } catch {
      n = null; // ECONNRESET: the server closed with our request unread
    }
    if (n === null) {
      closed = true;
      break;
    }
    buf += dec.decode(chunk.subarray(0, n), { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const f = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      frames.push(f);
      if (last(f)) done = true;
    }
  }
  // A refused peer: the server closes right after its one frame; see that close too (bounded: a
  // served request's error leaves the connection open, and that must not hang the client).
  if (done && frames.length === 1 && frames[0].type === "error") {
    let timer: ReturnType<typeof setTimeout> | undefined;
    closed = await Promise.race([
      c.read(chunk).then((n) => n === null, () => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), 5000)),
    ]);
    clearTimeout(timer);
  }
  c.close();
  Deno.stdout.writeSync(enc.encode(JSON.stringify({ frames, closed }) + "\n"));
}
clearTimeout(bound);
