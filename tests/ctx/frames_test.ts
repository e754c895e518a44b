/** The agent socket client parses every line the server sends: a frame outside the ABI is an EPROTO error in its place. */
import { assertEquals } from "../assert.ts";
import { AgentClient } from "../../src/ctx/client.ts";

Deno.test("AgentClient: frames of the socket ABI pass; unknown, extra-keyed, mistyped and non-JSON lines become EPROTO", async () => {
  const root = await Deno.makeTempDir({ prefix: "ctx-frames-" });
  await Deno.mkdir(`${root}/agent`);
  const l = Deno.listen({ transport: "unix", path: `${root}/agent/a.sock` });
  const lines = [
    { type: "delta", run: "r1", text: "hi" },
    { type: "grant", run: "r1", perm: "rwx" }, // no such frame
    { type: "delta", run: "r1", text: "hi", authority: "root" }, // a key the ABI has not
    { type: "done", run: "r1", status: "ok", ts: "now" }, // ts is a number
    "{not json",
    { type: "done", run: "r1", status: "ok", ts: 1 },
  ].map((x) => (typeof x === "string" ? x : JSON.stringify(x)) + "\n");
  const served = (async () => {
    const c = await l.accept();
    await c.write(new TextEncoder().encode(lines.join("")));
    c.close();
  })();
  const client = await AgentClient.connect(root, "a");
  try {
    const got: string[] = [];
    for (let f = await client.next(); f; f = await client.next()) {
      got.push(f.type === "error" ? `error ${f.code}` : f.type);
    }
    assertEquals(got, [
      "delta",
      "error EPROTO",
      "error EPROTO",
      "error EPROTO",
      "error EPROTO",
      "done",
    ]);
  } finally {
    client.close();
    l.close();
    await served;
    await Deno.remove(root, { recursive: true });
  }
});
