/** Starts the /ctx mount over one generation and serves it until unmount or stop. */
import * as libc from "../sys/libc.ts";
import {
  checkCommit,
  commitControl,
  controlKind,
  creating,
  type HostConfig,
  objectOwner,
  projectedText,
  secretControl,
  useHostConfig,
} from "./bridge.ts";
import { Conn } from "./conn.ts";
import { CtxFs } from "./ctxfs.ts";
import { type Mounted, mountFuse, prepareMountpoint, unmountFuse } from "./mount.ts";
import { type Serving, statusText } from "./status.ts";

/** Options for {@link startMount}. */
export interface MountServeOptions {
  /** Concrete generation directory served (resolved once, at startup). */
  root: string;
  /** Storage root and generation name (for the status file). */
  storage: string;
  generation: string;
  /** Mount point. */
  mount: string;
  /** Run directory (socket aliases point into it). */
  run: string;
  /** `bin/` launcher texts. */
  bins: Record<string, string>;
  /** Entry/attr timeout for home/ and shared/ in seconds (production: 1). */
  ttl?: number;
  /** How long the loop waits for the next request on the JS thread before yielding (ms). */
  waitMs?: number;
  /** Print rx/tx lines. */
  debug?: boolean;
  /**
   * An eventfd another thread rings after each message it posts to the serving thread (the stop
   * among them): given, the serving thread waits for requests blocked in poll(2) (see
   * `ConnOptions.wake`). Only for a thread of its own (the mount's worker, set up by thread.ts).
   */
  wake?: number;
  /** Called on the serving thread when it wakes for requests and in bursts (its scheduling: rt.ts). */
  tick?: (burst: boolean) => void;
  /** The serving thread's scheduling now, for the status file. */
  serving?: () => Serving;
  /**
   * FUSE passthrough for plain home/shared files when the kernel offers it (default true; needs
   * CAP_SYS_ADMIN, else every file stays served: spec/fuse.md "Passthrough").
   */
  passthrough?: boolean;
  /**
   * The host configuration the daemon read at its start (providers.d): used as this thread's
   * own, so the mount reads the directory no second time. Absent: read on first use.
   */
  host?: HostConfig;
  /** Mount with fusermount3 even as root. */
  fusermount?: boolean;
  /** Log lines (default: stderr). */
  log?: (line: string) => void;
  /**
   * Called when `agent/<name>` is renamed into place through the mount (the last step of
   * `ctx agent new`); the rename's reply waits for it, so the creator sees the socket at once.
   */
  onAgent?: (name: string) => void | Promise<unknown>;
  /** Called when `agent/<name>` is removed through the mount. */
  onAgentGone?: (name: string) => void | Promise<unknown>;
}

/** A served mount. */
export interface MountHandle {
  /** How it was mounted and where. */
  mounted: Mounted;
  /** "cleared" when a dead mount from a killed daemon was removed first. */
  prepared: "free" | "cleared";
  /** The projection (node table, handles) for diagnostics. */
  fs: CtxFs;
  /** Resolves when serving ended: unmounted from outside, DESTROY, or {@link stop}. */
  done: Promise<"unmounted" | "destroyed" | "stopped">;
  /** Unmounts (lazily when busy) and ends serving. */
  stop(): Promise<void>;
}

/** Refusal lines one uid may add to the daemon log per {@link REFUSAL_WINDOW_MS}; the rest are counted. */
export const REFUSALS_PER_WINDOW = 10;
const REFUSAL_WINDOW_MS = 10_000;

/**
 * Logs why a control write through the mount was refused (write(2) and close(2) carry only the
 * errno): `cortexfsd: refused uid U write of /ctx/<path>: EINVAL: <rule>`. Bounded per uid, so a
 * user looping on bad writes cannot fill the log: past the bound the lines are counted and the
 * count is told with the next line of a later window. No timer: the clock is read on each refusal.
 */
export function refusals(log: (line: string) => void, clock: () => number = Date.now) {
  const seen = new Map<number, { start: number; n: number; dropped: number }>();
  return (abiPath: string, uid: number, err: { errno: string; message: string }) => {
    const now = clock();
    let w = seen.get(uid);
    if (!w || now - w.start >= REFUSAL_WINDOW_MS) {
      const dropped = w?.dropped ?? 0;
      w = { start: now, n: 0, dropped: 0 };
      seen.set(uid, w);
      if (dropped) log(`cortexfsd: ${dropped} more refused writes by uid ${uid} not logged`);
    }
    if (++w.n > REFUSALS_PER_WINDOW) {
      w.dropped++;
      return;
    }
    // One line, whatever the rule quotes.
    // deno-lint-ignore no-control-regex
    const rule = err.message.replace(/[\x00-\x1f\x7f]/g, " ");
    log(`cortexfsd: refused uid ${uid} write of /ctx/${abiPath}: ${err.errno}: ${rule}`);
  };
}

/** Mounts `/ctx` at `options.mount` and starts serving; throws CtxError EBUSY over a live mount. */
export function startMount(options: MountServeOptions): MountHandle {
  const log = options.log ?? ((l: string) => console.error(l));
  const prepared = prepareMountpoint(options.mount);
  if (prepared === "cleared") {
    log(`cortexfsd: cleared a dead mount left at ${options.mount} by a killed daemon`);
  }
  // Files are created with the mode the kernel sends (already masked by the caller's umask).
  // The umask is shared by every thread of the process unless a thread unshared CLONE_FS (the
  // mount's worker does, worker.ts): called in-thread, this clears it for the whole process and
  // whatever it spawns.
  libc.umask(0);
  const started = Date.now();
  const root = options.root;
  if (options.host) useHostConfig(options.host);
  const fs = new CtxFs({
    root,
    run: options.run,
    bins: options.bins,
    ttl: options.ttl ?? 1,
    status: () =>
      statusText(root, {
        storage: options.storage,
        generation: options.generation,
        mount: options.mount,
        started,
        pid: Deno.pid,
        serving: options.serving,
      }),
    commit: (abiPath, bytes, o) => commitControl(root, abiPath, bytes, o),
    check: (abiPath, bytes, o) => checkCommit(root, abiPath, bytes, o),
    refused: refusals(log),
    controlKind,
    secret: secretControl,
    projected: (abiPath) => projectedText(root, abiPath),
    owner: (abiPath) => objectOwner(root, abiPath),
    creating: (name) => creating(root, name),
    onAgent: options.onAgent,
    onAgentGone: options.onAgentGone,
  });
  const mounted = mountFuse(options.mount, { fusermount: options.fusermount });
  const conn = new Conn(mounted.fd, fs, {
    debug: options.debug,
    log,
    waitMs: options.waitMs,
    passthrough: options.passthrough,
    wake: options.wake,
    tick: options.tick,
  });
  // A stop() that unmounted ends serving because of that unmount, whether the loop then reads
  // ENODEV or first sees the stop flag (which of the two wins is only timing).
  let unmounted = false;
  const done = conn.serve()
    .then((why) => why === "stopped" && unmounted ? "unmounted" : why)
    .finally(() => libc.close(mounted.fd));
  return {
    mounted,
    prepared,
    fs,
    done,
    async stop() {
      conn.unblock(); // the unmount's completion needs the event loop
      unmounted = (await unmountFuse(mounted)) === "unmounted";
      conn.stop();
      await done;
    },
  };
}
