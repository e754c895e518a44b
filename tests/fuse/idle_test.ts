/** An idle mount sets no timer: its serving thread waits in poll(2) on /dev/fuse and the wake fd, with no timeout, and still answers and stops. */
import { assert, assertEquals } from "../assert.ts";
import { mountedType } from "../../src/fuse/mod.ts";
import { cleanup, type Daemon, makeTree, startDaemon, until } from "../fixture/mod.ts";

/** poll(2) and ppoll(2) on x86_64 and aarch64 (no poll there): a timeout of -1, or a NULL timespec. */
const POLLS: Record<string, { nr: number; forever: bigint }[]> = {
  x86_64: [{ nr: 7, forever: 0xffffffffn }, { nr: 271, forever: 0n }],
  aarch64: [{ nr: 73, forever: 0n }],
};

/** A thread of `pid` blocked in poll: its tid, the polled fds and the timeout argument. */
interface Polling {
  tid: string;
  fds: number[];
  timeout: bigint;
}

/** Every thread of `pid` now blocked in a poll, with the fds of its pollfd array (read from /proc/PID/mem). */
function polling(pid: number): Polling[] {
  const out: Polling[] = [];
  const calls = POLLS[Deno.build.arch] ?? [];
  for (const e of Deno.readDirSync(`/proc/${pid}/task`)) {
    let line: string;
    try {
      line = Deno.readTextFileSync(`/proc/${pid}/task/${e.name}/syscall`);
    } catch {
      continue; // the thread ended
    }
    const f = line.trim().split(" ");
    const call = calls.find((c) => c.nr === Number(f[0]));
    if (!call || f.length < 4) continue;
    const addr = BigInt(f[1]), n = Number(BigInt(f[2]));
    if (n < 1 || n > 16) continue;
    const buf = new Uint8Array(8 * n);
    const mem = Deno.openSync(`/proc/${pid}/mem`);
    try {
      mem.seekSync(addr, Deno.SeekMode.Start);
      if (mem.readSync(buf) !== buf.length) continue;
    } catch {
      continue; // gone meanwhile
    } finally {
      mem.close();
    }
    const v = new DataView(buf.buffer);
    const fds = Array.from({ length: n }, (_, i) => v.getInt32(8 * i, true));
    out.push({ tid: e.name, fds, timeout: BigInt(f[3]) });
  }
  return out;
}

function linkOf(pid: number, fd: number): string {
  try {
    return Deno.readLinkSync(`/proc/${pid}/fd/${fd}`);
  } catch {
    return "";
  }
}

/** The thread of `pid` waiting on /dev/fuse, once it waits there. */
async function servingWait(pid: number): Promise<Polling> {
  let found: Polling | undefined;
  await until(() => {
    found = polling(pid).find((p) => p.fds.some((fd) => linkOf(pid, fd) === "/dev/fuse"));
    return found !== undefined;
  }, "a thread of cortexfsd blocked in poll on /dev/fuse");
  return found as Polling;
}

for (const args of [[], ["--mount-priority", "1"]]) {
  Deno.test(`an idle mount${args.length ? ` (${args.join(" ")})` : ""} waits for requests in poll(2) with no timeout, answers, and stops`, async () => {
    const tree = await makeTree();
    let d: Daemon | undefined;
    try {
      d = await startDaemon(tree, { args });
      const pid = d.child.pid;
      assert((await Deno.stat(`${tree.mount}/status`)).isFile);
      const w = await servingWait(pid);
      const forever = (POLLS[Deno.build.arch] ?? []).map((c) => c.forever);
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
