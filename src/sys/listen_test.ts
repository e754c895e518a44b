import net from "node:net";
import { assertEquals } from "../../tests/assert.ts";
import { isCloexec } from "./sock.ts";
import { closeFd, listenUnix, pollReadable, refuseWaiting, Wake } from "./listen.ts";

Deno.test("listenUnix() is close-on-exec; pollReadable() wakes on a waiting client or a ring, never accepting", async () => {
  const dir = Deno.makeTempDirSync();
  const path = `${dir}/s.sock`;
  const fd = listenUnix(path);
  const wake = new Wake();
  try {
    assertEquals([fd > 2, isCloexec(fd), Deno.lstatSync(path).isSocket], [true, true, true]);
    const rung = pollReadable([fd], wake);
    wake.ring();
    assertEquals(await rung, []);
    const waiting = pollReadable([fd], wake);
    const c = net.connect(path);
    const answer = new Promise<string>((r) => {
      let s = "";
      c.setEncoding("utf8");
      c.on("data", (d: string) => s += d);
      c.on("close", () => r(s));
      c.on("error", () => {});
    });
    assertEquals(await waiting, [fd]);
    // Still waiting in the backlog (nobody accepted): answered here and closed.
    assertEquals(refuseWaiting(fd, new TextEncoder().encode("no\n")), 1);
    assertEquals(await answer, "no\n");
  } finally {
    wake.close();
    closeFd(fd);
    Deno.removeSync(dir, { recursive: true });
  }
});
