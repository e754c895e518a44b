/** PollFds builds struct pollfd arrays poll(2) reads and reports through; libc's one-fd waits and peerGone() poll through it. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { libc } from "./ffi.ts";
import { close, peerGone, pollIn, pollInSync, socketpair, write } from "./libc.ts";
import { POLL, PollFds } from "./poll.ts";

function pair(): [number, number] {
  const p = socketpair({ cloexec: true });
  assert(typeof p !== "number", `socketpair: errno ${-p}`);
  return p;
}

Deno.test("PollFds: each entry's fd and events reach poll(2), and its revents come back per entry", async () => {
  const [a, b] = pair();
  const [c, d] = pair();
  const [e, f] = pair();
  try {
    write(b, new Uint8Array([1]));
    close(f); // e's peer is gone
    const p = PollFds.of([a, c, e], POLL.IN);
    assertEquals(libc().poll_sync(p.buf, p.count, 0), 2);
    assertEquals([p.revents(0), p.revents(1), p.revents(2)], [POLL.IN, 0, POLL.IN | POLL.HUP]);
    // Refilled: the old revents are cleared, the new fd and events are the ones asked.
    p.set(0, c, POLL.OUT);
    p.set(1, a, 0);
    assertEquals(libc().poll_sync(p.buf, 2n, 0), 1);
    assertEquals([p.revents(0), p.revents(1), p.revents(2)], [POLL.OUT, 0, POLL.IN | POLL.HUP]);
    // Off the JS thread, the same array.
    assertEquals(await libc().poll(p.buf, p.count, 0), 2);
    assertEquals(p.revents(0), POLL.OUT);
  } finally {
    for (const fd of [a, b, c, d, e]) close(fd);
  }
});

Deno.test("PollFds: an fd that is not open reports POLLNVAL", () => {
  // Far above any RLIMIT_NOFILE: never open, whatever the other test modules of this process
  // (--parallel) open meanwhile (a number just closed could be handed out again at once).
  const a = 0x3fffffff;
  const p = PollFds.of([a], POLL.IN);
  assertEquals([libc().poll_sync(p.buf, p.count, 0), p.revents(0)], [1, POLL.NVAL]);
});

Deno.test("pollInSync() and pollIn() report readability of the fd asked; peerGone() only a full close", async () => {
  const [a, b] = pair();
  try {
    assertEquals([pollInSync(a, 0), await pollIn(a, 0), peerGone(a)], [0, 0, false]);
    write(b, new Uint8Array([1]));
    assertEquals([pollInSync(a, 0), await pollIn(a, 0), pollInSync(b, 0)], [1, 1, 0]);
    close(b);
    assertEquals(peerGone(a), true);
  } finally {
    close(a);
  }
});
