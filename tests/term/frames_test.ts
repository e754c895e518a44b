/** The terminal client parses every JSON frame a server sends: one off the spec's shape is EPROTO. */
import { assertEquals, assertRejects } from "../assert.ts";
import { CtxError } from "../../src/abi/errno.ts";
import { encodeFrame, FRAME, jsonFrame } from "../../src/abi/terminal.ts";
import { join } from "../../src/term/client.ts";
import { readyOf } from "../../src/term/launch.ts";

const hello = {
  id: "t1",
  mode: "watch",
  client: 1,
  rows: 24,
  cols: 80,
  pid: 2,
  agent: "a",
  session: "s",
};

/** Serves one connection on a fresh socket: reads the mode line, sends `frames`, waits for the close. */
async function serve(frames: Uint8Array[], run: (socket: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ctx-term-frames-" });
  const socket = `${dir}/t.sock`;
  const l = Deno.listen({ transport: "unix", path: socket });
  const served = (async () => {
    const c = await l.accept();
    const buf = new Uint8Array(64);
    let got = "";
    while (!got.includes("\n")) {
      const n = await c.read(buf);
      if (n === null) break;
      got += new TextDecoder().decode(buf.subarray(0, n));
    }
    for (const f of frames) await c.write(f);
    while (await c.read(buf).catch(() => null) !== null) { /* until the client closes */ }
    c.close();
  })();
  try {
    await run(socket);
  } finally {
    l.close();
    await served.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
}

const raw = (type: number, text: string) => encodeFrame(type, new TextEncoder().encode(text));

Deno.test("a well-formed hello then exit frame: join returns the program's exit code", async () => {
  await serve(
    [jsonFrame(FRAME.hello, hello), jsonFrame(FRAME.exit, { exit_code: 3, signal: null })],
    async (socket) => {
      assertEquals(await join({ socket, mode: "watch", quiet: true }), 3);
    },
  );
});

Deno.test("a malformed hello, exit or error frame ends join with EPROTO", async () => {
  const bad: [string, Uint8Array[]][] = [
    ["hello not JSON", [raw(FRAME.hello, "{")]],
    ["hello with a numeric id", [jsonFrame(FRAME.hello, { ...hello, id: 5 })]],
    ["hello with an extra key", [jsonFrame(FRAME.hello, { ...hello, grant: true })]],
    ["exit code a string", [
      jsonFrame(FRAME.hello, hello),
      jsonFrame(FRAME.exit, { exit_code: "0", signal: null }),
    ]],
    ["exit without its code", [jsonFrame(FRAME.exit, { signal: 9 })]],
    ["error code a number", [jsonFrame(FRAME.error, { code: 13, message: "no" })]],
    ["error not an object", [raw(FRAME.error, '"EACCES"')]],
  ];
  for (const [what, frames] of bad) {
    await serve(frames, async (socket) => {
      const e = await assertRejects(() => join({ socket, mode: "watch", quiet: true }), CtxError);
      assertEquals(e.errno, "EPROTO", what);
    });
  }
});

Deno.test("a well-formed error frame still ends join with the server's errno", async () => {
  await serve(
    [jsonFrame(FRAME.error, { code: "EACCES", message: "not yours" })],
    async (socket) => {
      const e = await assertRejects(() => join({ socket, mode: "watch", quiet: true }), CtxError);
      assertEquals(e.errno, "EACCES");
    },
  );
});

Deno.test("readyOf() takes ctxterm's ready line only in its exact shape", () => {
  const ok = { ready: true, socket: "/run/t.sock", pid: 10, child: 11 };
  assertEquals(readyOf(JSON.stringify(ok)), { pid: 10, socket: "/run/t.sock", child: 11 });
  for (
    const bad of [
      { ...ok, pid: "10" },
      { ...ok, child: undefined },
      { ...ok, socket: 1 },
      { ...ok, ready: "yes" },
      { ...ok, extra: 1 },
    ]
  ) assertEquals(readyOf(JSON.stringify(bad)), null, JSON.stringify(bad));
  assertEquals(readyOf("ready"), null);
});
