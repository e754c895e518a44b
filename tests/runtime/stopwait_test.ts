/** stopGroup() on a leader in D state (blocked on a FUSE request nobody answers): the stop wait is bounded, the JS thread runs on, and the wait's thread ends with the leader. */
import { assert, assertEquals } from "../assert.ts";
import { until } from "../fixture/mod.ts";
import { pidOf } from "../fixture/proc.ts";
import {
  decode,
  encode,
  IN_HEADER,
  INIT_OUT,
  INTERRUPT_IN,
  OP,
  OUT_HEADER,
} from "../../src/abi/fuse.ts";
import { ERRNO, ignore } from "../../src/abi/errno.ts";
import { mountFuse } from "../../src/fuse/mount.ts";
import { stopGroup, type StopWait } from "../../src/runtime/proc.ts";
import * as libc from "../../src/sys/libc.ts";

const buf = new Uint8Array((1 << 20) + 8192);

/** The next request on `fd`, read once poll says so (off the JS thread). */
async function next(fd: number): Promise<{ opcode: number; unique: number; body: DataView }> {
  for (;;) {
    await libc.pollIn(fd);
    const n = libc.read(fd, buf);
    if (n >= IN_HEADER.size) {
      const view = new DataView(buf.buffer, 0, n);
      const h = decode(IN_HEADER, view);
      return { opcode: h.opcode, unique: h.unique, body: new DataView(buf.buffer, IN_HEADER.size) };
    }
    // ENOENT: the request was interrupted before the read; anything else ends the test
    if (n !== -ERRNO.ENOENT) throw new Error(`read(/dev/fuse): ${n}`);
  }
}

/** Answers INIT: protocol 7.31, nothing asked for. */
function replyInit(fd: number, unique: number): void {
  const out = new Uint8Array(OUT_HEADER.size + INIT_OUT.size);
  const v = new DataView(out.buffer);
  encode(OUT_HEADER, v, 0, { len: out.length, error: 0, unique });
  encode(INIT_OUT, v, OUT_HEADER.size, { major: 7, minor: 31, max_write: 4096, max_pages: 1 });
  const r = libc.write(fd, out);
  if (r !== out.length) throw new Error(`write(/dev/fuse) of INIT: ${r}`);
}

/** The pending-signal sets (`SigPnd` | `ShdPnd`) of `pid`, as a bigint bit mask. */
function pending(pid: number): bigint {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const hex = (k: string) =>
    BigInt("0x" + (new RegExp(`^${k}:\\s*(\\w+)$`, "m").exec(status)?.[1] ?? "0"));
  return hex("SigPnd") | hex("ShdPnd");
}

const WAITID = Deno.build.arch === "x86_64" ? "247" : "95"; // aarch64: the generic table

/** The pidfds that threads of this process are blocked on in waitid(P_PIDFD, fd, ...). */
function waitedFds(): number[] {
  const fds: number[] = [];
  for (const t of Deno.readDirSync("/proc/self/task")) {
    try {
      const f = Deno.readTextFileSync(`/proc/self/task/${t.name}/syscall`).trim().split(" ");
      if (f[0] === WAITID && f[1] === "0x3") fds.push(parseInt(f[2], 16));
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* the thread ended */
    }
  }
  return fds;
}

function state(pid: number): string {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}

Deno.test({
  name:
    "stopGroup() bounds the wait for a leader in D state without blocking the JS thread; the wait ends with the leader",
  ignore: Deno.uid() !== 0, // mount(2) of a FUSE file system needs root; CI runs as root
}, async () => {
  const dir = Deno.makeTempDirSync({ prefix: "stopwait-" });
  const m = mountFuse(dir, { fsname: "stopwait" });
  let fuse = m.fd;
  let child: Deno.ChildProcess | undefined;
  let stopping: Promise<StopWait> | undefined;
  try {
    const init = await next(fuse);
    assertEquals(init.opcode, OP.INIT);
    replyInit(fuse, init.unique);
    const leader = new Deno.Command("stat", {
      args: [`${dir}/x`],
      stdout: "null",
      stderr: "null",
    }).spawn();
    child = leader;
    // Its first request (GETATTR of the root or LOOKUP of x) is never answered.
    const hung = await next(fuse);
    stopping = stopGroup(leader, 50);
    // SIGSTOP interrupts the request's wait: the kernel sends INTERRUPT and the leader waits on,
    // now in D state, where no stop can take effect. This thread reads that INTERRUPT meanwhile.
    const interrupt = await next(fuse);
    assertEquals(
      [interrupt.opcode, decode(INTERRUPT_IN, interrupt.body).unique],
      [OP.INTERRUPT, hung.unique],
    );
    await until(() => state(leader.pid) === "D", "the leader to wait in D state");
    // ... and the stop is waited for on a thread of Deno's blocking pool, not on this one.
    let waited = -1;
    await until(() => {
      waited = waitedFds().find((fd) => pidOf(fd) === leader.pid) ?? -1;
      return waited >= 0;
    }, "a thread to wait in waitid on the leader's pidfd");
    // Past the bound stopGroup goes on: SIGCONT, SIGTERM, SIGKILL after the grace. A request
    // already sent waits on for its answer even then; aborting the connection ends it.
    await until(() => (pending(leader.pid) & (1n << 8n)) !== 0n, "SIGKILL to be pending", 10_000);
    libc.close(fuse);
    fuse = -1;
    assertEquals(await stopping, "late", "the wait ended at its bound (no stop in D state)");
    // Killed by the SIGKILL on 6.18: the SIGTERM only pends (ShdPnd) on a task in D state; a
    // kernel that took SIGTERM's fatal path at once would report SIGTERM.
    const { signal } = await leader.status;
    assert(signal === "SIGKILL" || signal === "SIGTERM", `the leader ended by ${signal}`);
    // The waitid that never saw a stop returned with the exit, before stopGroup did.
    assertEquals(waitedFds().includes(waited), false);
  } finally {
    if (fuse >= 0) libc.close(fuse); // aborts the connection: the leader can die
    if (child) {
      try {
        child.kill("SIGKILL");
      } catch (e) {
        ignore(e, TypeError); /* reaped */
      }
      await stopping?.catch(() => {});
      await child.status;
    }
    libc.umount2(dir, libc.MNT.DETACH);
    Deno.removeSync(dir, { recursive: true });
  }
});
