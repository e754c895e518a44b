import net from "node:net";
import { assertEquals } from "../../tests/assert.ts";
import { isCloexec } from "./sock.ts";
import { ERRNO } from "../abi/errno.ts";
import {
  answersUnix,
  BACKLOG,
  closeFd,
  listenUnix,
  pollReadable,
  refuseWaiting,
  Wake,
} from "./listen.ts";

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

Deno.test("answersUnix(): 0 while a listener is there (backlog full included), -ECONNREFUSED for a dead socket file, -ENOENT for none", () => {
  const dir = Deno.makeTempDirSync();
  const path = `${dir}/s.sock`;
  let fd = listenUnix(path);
  try {
    // Never accepted: the connects stay in the backlog until it is full (EAGAIN: still a listener).
    for (let i = 0; i < BACKLOG + 2; i++) assertEquals(answersUnix(path), 0);
    closeFd(fd);
    fd = -1;
    assertEquals(answersUnix(path), -ERRNO.ECONNREFUSED);
    assertEquals(answersUnix(`${dir}/none.sock`), -ERRNO.ENOENT);
  } finally {
    if (fd >= 0) closeFd(fd);
    Deno.removeSync(dir, { recursive: true });
  }
});
