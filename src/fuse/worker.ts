/** The mount's Worker: serves /ctx (startMount) and does nothing else; hooks go to the parent. */
import { CtxError, errnoName, toCtxError } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { AdaptiveSched, type RunQueue } from "./sched.ts";
import { type MountHandle, startMount } from "./serve.ts";
import type { FromWorker, ToWorker, WorkerOptions } from "./thread.ts";

// This module only runs as a Worker; the cast spares the file a second (worker) lib for checking.
const scope = self as unknown as {
  postMessage(m: FromWorker): void;
  onmessage: ((e: MessageEvent<ToWorker>) => void) | null;
};
const post = (m: FromWorker) => scope.postMessage(m);

/** Hook replies the parent still owes, by id. */
const waiting = new Map<number, () => void>();
let nextId = 0;
let handle: MountHandle | null = null;

/**
 * A hook that runs on the parent thread: the FUSE reply it guards waits for the parent's answer,
 * but never longer than `ms` (the kernel holds `agent/`'s lock meanwhile; see thread.ts).
 */
function remote(hook: "onAgent" | "onAgentGone", ms: number) {
  return (name: string) =>
    new Promise<void>((resolve) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        if (!waiting.delete(id)) return;
        console.error(
          `cortexfsd: agent hook for "${name}" still running after ${ms} ms; replied without it`,
        );
        resolve();
      }, ms);
      waiting.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
      post({ type: "hook", id, hook, name });
    });
}

/**
 * This thread's run-queue wait and time slices, read from `/proc/thread-self/schedstat` (opened
 * once, here on the thread it names; read again with pread at 0, which regenerates it); null
 * where it cannot be read.
 */
function runQueue(): () => RunQueue | null {
  const fd = libc.open(libc.cstr("/proc/thread-self/schedstat"), libc.O.RDONLY);
  const buf = new Uint8Array(128);
  const dec = new TextDecoder();
  return () => {
    const n = fd < 0 ? -1 : libc.pread(fd, buf, 0);
    if (n <= 0) return null;
    const f = dec.decode(buf.subarray(0, n)).split(" ");
    return { waitNs: Number(f[1]), slices: Number(f[2]) };
  };
}

/**
 * Puts this thread (and the poll threads its runtime starts later, which inherit it) at SCHED_RR
 * `priority`: under load a request is answered as soon as it arrives, not after the agents' CPU
 * slices. `adaptive`: the policy switches that then drop it to the ordinary policy during a
 * client's burst (sched.ts). What it got, for the daemon's log.
 */
function schedule(
  priority: number,
  policy: "adaptive" | "rr",
): { log: string; sched?: AdaptiveSched } {
  if (priority === 0) return { log: "ordinary" };
  const r = libc.setSched(libc.SCHED.RR, priority);
  if (r !== 0) return { log: `ordinary: SCHED_RR ${priority} refused (${errnoName(-r)})` };
  if (policy === "rr") return { log: `SCHED_RR ${priority}` };
  const sched = new AdaptiveSched((rt) => {
    libc.setSched(rt ? libc.SCHED.RR : libc.SCHED.OTHER, rt ? priority : 0);
  }, runQueue());
  return { log: `SCHED_RR ${priority} adaptive`, sched };
}

function start(options: WorkerOptions): void {
  const { hookWaitMs, priority, policy, ...serve } = options;
  const ms = hookWaitMs ?? 5000;
  let sched = "ordinary";
  try {
    // Before the mount starts any thread of its own; the spawns it makes drop to the ordinary
    // policy (libc.ordinary), so no child inherits it.
    const got = schedule(priority ?? 0, policy ?? "adaptive");
    sched = got.log;
    // startMount sets umask 0; with an fs_struct of its own that holds for this thread only, so
    // the runtime's thread (and what it spawns) keeps the umask the process was started with.
    const r = libc.unshareFs();
    if (r < 0) throw new CtxError("EIO", `unshare(CLONE_FS) failed: errno ${-r}`);
    handle = startMount({
      ...serve,
      sched: got.sched,
      onAgent: remote("onAgent", ms),
      onAgentGone: remote("onAgentGone", ms),
    });
  } catch (e) {
    const err = toCtxError(e);
    post({ type: "failed", errno: err.errno, message: err.message, path: err.path });
    return;
  }
  post({ type: "started", mounted: handle.mounted, prepared: handle.prepared, sched });
  handle.done.then(
    (why) => post({ type: "done", why }),
    (e) => post({ type: "crashed", error: e instanceof Error ? e.stack ?? e.message : String(e) }),
  );
}

scope.onmessage = (ev) => {
  const m = ev.data;
  switch (m.type) {
    case "start":
      start(m.options);
      return;
    case "hooked":
      waiting.get(m.id)?.();
      waiting.delete(m.id);
      return;
    case "stop":
      // `done` reports the end (or the crash) once the unmount let the loop finish.
      handle?.stop().catch((e) => post({ type: "crashed", error: String(e) }));
      return;
  }
};
