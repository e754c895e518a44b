/** The mount's Worker: serves /ctx (startMount) and does nothing else; hooks go to the parent. */
import { CtxError, errnoName, toCtxError } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { RealTime } from "./rt.ts";
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
 * Puts this thread (and the poll threads its runtime starts later, which inherit it) at SCHED_RR
 * `priority`: under load a request is answered as soon as it arrives, not after the agents' CPU
 * slices. What it got, for the daemon's log.
 */
function schedule(priority: number): { sched: string; rt?: RealTime } {
  if (priority === 0) return { sched: "ordinary" };
  const r = libc.setSched(libc.SCHED.RR, priority);
  if (r === 0) return { sched: `SCHED_RR ${priority}`, rt: new RealTime(priority) };
  return { sched: `ordinary: SCHED_RR ${priority} refused (${errnoName(-r)})` };
}

function start(options: WorkerOptions): void {
  const { hookWaitMs, priority, ...serve } = options;
  const ms = hookWaitMs ?? 5000;
  let sched = "ordinary";
  try {
    // Before the mount starts any thread of its own; the spawns it makes drop to the ordinary
    // policy (libc.ordinary), so no child inherits it.
    const s = schedule(priority ?? 0);
    sched = s.sched;
    // startMount sets umask 0; with an fs_struct of its own that holds for this thread only, so
    // the runtime's thread (and what it spawns) keeps the umask the process was started with.
    const r = libc.unshareFs();
    if (r < 0) throw new CtxError("EIO", `unshare(CLONE_FS) failed: errno ${-r}`);
    handle = startMount({
      ...serve,
      tick: s.rt ? (burst) => s.rt?.tick(burst) : undefined,
      serving: () => ({
        policy: s.rt?.rr ? "SCHED_RR" : "ordinary",
        priority: s.rt ? priority ?? 0 : 0,
        drops: s.rt?.drops ?? 0,
      }),
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
