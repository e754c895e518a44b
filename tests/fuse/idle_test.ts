/** An idle mount sets no timer: its serving thread waits in poll(2) on /dev/fuse and the wake fd, with no timeout, and still answers and stops. */
import { assert, assertEquals } from "../assert.ts";
import { mountedType } from "../../src/fuse/mod.ts";
import {
  cleanup,
  type Daemon,
  linkOf,
  makeTree,
  POLLS,
  servingWait,
  startDaemon,
} from "../fixture/mod.ts";

for (const args of [[], ["--mount-priority", "0"]]) {
  Deno.test(`an idle mount${args.length ? ` (${args.join(" ")})` : ""} waits for requests in poll(2) with no timeout, answers, and stops`, async () => {
    const tree = await makeTree();
    let d: Daemon | undefined;
    try {
      d = await startDaemon(tree, { args });
      const pid = d.child.pid;
      assert((await Deno.stat(`${tree.mount}/status`)).isFile);
      const w = await servingWait(pid);
      const forever = POLLS.map((c) => c.forever);
      assert(
        forever.includes(w.timeout),
        `timeout argument ${w.timeout}: ${JSON.stringify(w.fds)}`,
      );
      // The device and the wake fd the host thread rings with each message (an eventfd).
      assertEquals(w.fds.length, 2, JSON.stringify(w.fds));
      assert(
        w.fds.some((fd) => linkOf(pid, fd) === "anon_inode:[eventfd]"),
        w.fds.map((fd) => linkOf(pid, fd)).join(" "),
      );
      // Blocked there, it is woken by the next request and goes back to the same wait.
      assertEquals(Deno.readTextFileSync(`${tree.mount}/status`).length > 0, true);
      assertEquals((await servingWait(pid)).tid, w.tid);
      // The stop's message gets its event loop turn through the wake fd: the unmount completes.
      assertEquals(await d.stop(), 0, d.log());
      assertEquals(mountedType(tree.mount), null, d.log());
      d = undefined;
    } finally {
      await cleanup(tree, d);
    }
  });
}
