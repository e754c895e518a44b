/** Presence in an instance (presence.ts `report`): every status goes to the host, nothing is written here, and each transition resolves only once the host has acknowledged it. */
import { assertEquals } from "../../tests/assert.ts";
import { type AgentStatus, Presence } from "./presence.ts";

Deno.test("Presence with report: serve/begin/end report ready, busy, ready in order, write no file, and wait for each acknowledgement", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "cortexfs-presence-" });
  try {
    Deno.mkdirSync(`${dir}/agent/a.d`, { recursive: true });
    const said: AgentStatus[] = [];
    const acks: (() => void)[] = [];
    const p = new Presence(dir, {
      report: (st) => {
        said.push(st);
        return new Promise<void>((r) => acks.push(r));
      },
    });
    const order: string[] = [];
    const served = p.serve("a").then(() => order.push("served"));
    const began = p.begin("a").then(() => order.push("began"));
    const second = p.begin("a").then(() => order.push("second")); // already busy: nothing said
    await second;
    assertEquals([said, order], [["ready", "busy"], ["second"]]);
    acks.shift()?.();
    await served;
    assertEquals(order, ["second", "served"]);
    acks.shift()?.();
    await began;
    await p.end("a"); // one run still live: nothing said
    const ended = p.end("a");
    assertEquals(said, ["ready", "busy", "ready"]);
    acks.shift()?.();
    await ended;
    assertEquals([...Deno.readDirSync(`${dir}/agent/a.d`)].map((e) => e.name), []);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
