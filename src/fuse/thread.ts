/** The /ctx mount served by a Worker thread of its own, and the calling thread's handle on it. */
import { CtxError, type Errno } from "../abi/errno.ts";
import type { Mounted } from "./mount.ts";
import type { MountServeOptions } from "./serve.ts";
import { Wake } from "../sys/listen.ts";

/** Options for {@link startMountThread}: those of `startMount`, with hooks run on this thread. */
export interface MountThreadOptions
  extends Omit<MountServeOptions, "log" | "wake" | "tick" | "serving"> {
  /**
   * Longest a RENAME/UNLINK reply in `agent/` waits for its hook (ms, default 5000). The kernel
   * holds `agent/`'s directory lock until that reply; a hook stuck behind a synchronous call of
   * this thread into `agent/` would otherwise wait for itself.
   */
  hookWaitMs?: number;
  /**
   * SCHED_RR priority (1-99) of the serving thread, or 0 for the ordinary policy (the default
   * here; cortexfsd's is 1): at SCHED_RR a FUSE request on a busy machine waits for no agent's
   * process; while the thread uses over half a CPU it drops to the ordinary policy (rt.ts).
   */
  priority?: number;
}

/** Why serving ended. */
export type MountEnd = "unmounted" | "destroyed" | "stopped";

/** A mount served by its own thread; same shape as `MountHandle` without the in-thread `fs`. */
export interface MountThread {
  /** How it was mounted and where. */
  mounted: Mounted;
  /** "cleared" when a dead mount from a killed daemon was removed first. */
  prepared: "free" | "cleared";
  /** The serving thread's scheduling: `SCHED_RR 1`, `ordinary`, or why not real-time. */
  sched: string;
  /** Resolves when serving ended (the worker is gone by then); rejects if the worker died. */
  done: Promise<MountEnd>;
  /** Unmounts (lazily when busy), ends serving and the worker. */
  stop(): Promise<void>;
}

/** The serializable part of the options, sent to the worker. */
export type WorkerOptions = Omit<MountThreadOptions, "onAgent" | "onAgentGone"> & {
  /** The eventfd this thread rings after each message (the worker waits for requests blocked). */
  wake: number;
};

/** Messages from this thread to the worker. */
export type ToWorker =
  | { type: "start"; options: WorkerOptions }
  | { type: "hooked"; id: number }
  | { type: "stop" };

/** Messages from the worker to this thread. */
export type FromWorker =
  | { type: "started"; mounted: Mounted; prepared: "free" | "cleared"; sched: string }
  | { type: "failed"; errno: Errno; message: string; path?: string }
  | { type: "hook"; id: number; hook: "onAgent" | "onAgentGone"; name: string }
  | { type: "done"; why: MountEnd }
  | { type: "crashed"; error: string };

/**
 * Mounts `/ctx` and serves it from a new Worker, so this thread may block in a synchronous call
 * into the mount (a workspace under /ctx/home) and still be answered. Rejects with the mount's
 * CtxError (EBUSY over a live mount) when mounting fails.
 */
export function startMountThread(options: MountThreadOptions): Promise<MountThread> {
  const { onAgent, onAgentGone, ...rest } = options;
  const hooks = { onAgent, onAgentGone };
  // Deno workers inherit this thread's permissions (cortexfsd: -A; the worker needs ffi and fs).
  // From source the worker is worker.ts beside this file; in the built single file (packaging/,
  // one bundle per program) this module is inside the program's .js and worker.js lies beside it.
  const entry = import.meta.url.endsWith(".ts") ? "./worker.ts" : "./worker.js";
  const worker = new Worker(new URL(entry, import.meta.url).href, { type: "module" });
  // The worker waits for requests blocked in poll(2), its event loop still: a message needs a ring.
  const wake = new Wake();
  let over = false; // a hook may finish after the worker is gone: nothing left to tell it
  const post = (m: ToWorker) => {
    if (over) return;
    worker.postMessage(m);
    wake.ring();
  };
  const end = () => {
    if (over) return; // the wake fd is closed once: its number may be another file's by then
    over = true;
    worker.terminate();
    wake.close();
  };
  let ended: ((why: MountEnd) => void) | null = null;
  let died: ((e: Error) => void) | null = null;
  const done = new Promise<MountEnd>((resolve, reject) => {
    ended = (why) => {
      end();
      resolve(why);
    };
    died = (e) => {
      end();
      reject(e);
    };
  });
  let stopping: Promise<void> | null = null;
  return new Promise((resolve, reject) => {
    let started = false;
    const fail = (e: Error) => {
      if (started) died?.(e);
      else {
        end();
        reject(e);
      }
    };
    worker.onerror = (e) => {
      e.preventDefault(); // reported through `done` (or the start), not as this thread's crash
      fail(new CtxError("EIO", `the mount's worker died: ${e.message}`));
    };
    worker.onmessageerror = () => fail(new CtxError("EIO", "the mount's worker sent garbage"));
    worker.onmessage = (ev: MessageEvent<FromWorker>) => {
      const m = ev.data;
      switch (m.type) {
        case "started":
          started = true;
          resolve({
            mounted: m.mounted,
            prepared: m.prepared,
            sched: m.sched,
            done,
            stop() {
              stopping ??= (async () => {
                post({ type: "stop" });
                await done.catch(() => {});
              })();
              return stopping;
            },
          });
          return;
        case "failed":
          end();
          reject(new CtxError(m.errno, m.message, m.path ? { path: m.path } : {}));
          return;
        case "hook":
          void runHook(hooks[m.hook], m.name).then(() => post({ type: "hooked", id: m.id }));
          return;
        case "done":
          ended?.(m.why);
          return;
        case "crashed":
          fail(new CtxError("EIO", `serving /ctx failed: ${m.error}`));
          return;
      }
    };
    post({ type: "start", options: { ...rest, wake: wake.fd } });
  });
}

/** Runs one agent hook; a failure is logged here (the agent exists either way). */
async function runHook(
  hook: ((n: string) => void | Promise<unknown>) | undefined,
  name: string,
): Promise<void> {
  try {
    await hook?.(name);
  } catch (e) {
    console.error(`cortexfsd: agent hook for "${name}" failed: ${e}`);
  }
}
