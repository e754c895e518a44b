/** Stopping an agent step's process group (its bwrap, started by src/sandbox/launch.ts spawnSandbox). */
import { asSender } from "../sys/fsid.ts";
import { closeFd, pidfdAlive } from "../sys/sock.ts";
import { pidfdOpen, W, waitChild } from "../sys/wait.ts";
import { ignore } from "../abi/errno.ts";

/** Grace between SIGTERM and SIGKILL when stopping a group. */
export const GRACE_MS = 250;

// Every signal below is sent as the uid the step runs as (`uid`, asSender): the instance holds no
// CAP_KILL.

function signalGroup(pgid: number, sig: Deno.Signal, uid: number): boolean {
  try {
    asSender(uid, () => Deno.kill(-pgid, sig));
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false; // ESRCH: the whole group is gone
  }
}

/**
 * The group, and the child itself: until the child's setsid(1) has run (a cancel can come right
 * after the spawn, and under load that takes long), its group does not exist yet and a signal to
 * the group alone reached nothing, leaving a step that a cancelled run still waited on. The
 * child's own signal goes through its handle, which refuses once it has been reaped (no pid reuse).
 */
function signalStep(child: Deno.ChildProcess, sig: Deno.Signal, uid: number): void {
  signalGroup(child.pid, sig, uid);
  try {
    asSender(uid, () => child.kill(sig));
  } catch (e) {
    ignore(e, TypeError); /* reaped already */
  }
}

/** Longest wait for the leader's stop: microseconds, unless it is in D state (a hung FUSE request). */
export const STOP_BOUND_MS = 1000;

/**
 * Waits off the JS thread until the child behind `pidfd` is stopped or has exited, without reaping
 * it (W.NOWAIT: Deno's own reaper still takes the exit and resolves `child.status`); "gone" once
 * Deno has reaped it (ECHILD). A failed waitid is ECHILD or EINTR (errno is unreadable off-thread):
 * the pidfd tells which. One that keeps failing while the child lives is "unknown", as is a
 * rejected call: the caller goes on as after the bound.
 */
async function stopOrExit(
  pidfd: number,
  uid: number,
): Promise<"stopped" | "exited" | "gone" | "unknown"> {
  try {
    for (let i = 0; i < 3; i++) {
      const r = await waitChild(pidfd, W.STOPPED | W.EXITED | W.NOWAIT);
      if (typeof r !== "number") return r.how === "stopped" ? "stopped" : "exited";
      if (alive(pidfd, uid) !== 0) return "gone";
    }
  } catch { /* any kind: "unknown" is never taken for gone, so it is the safe answer */ }
  return "unknown";
}

/** The pids of `pid`'s children (its main thread's), or none when it is gone. */
function childrenOf(pid: number): number[] {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim().split(/\s+/)
      .filter(Boolean).map(Number);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return [];
  }
}

/**
 * SIGKILLs the child's own children, read while it is stopped (no clone can be under way then).
 * The step's leader is bwrap's monitor and its child the sandbox init, which takes the whole pid
 * namespace with it. The monitor alone is not enough: killed right after its clone, before the
 * init has set its parent-death signal, the init lives on as an orphan in a session of its own,
 * runs the command and holds the step's stdout, so the cancelled run's session waits for it
 * (tests/runtime/chat_test.ts saw it under load).
 *
 * The stop is waited for as an event (waitid on a pidfd, off the JS thread), raced against
 * {@link STOP_BOUND_MS}. The pidfd is opened before the SIGSTOP goes through Deno's handle, which
 * refuses once Deno has reaped the child: a SIGSTOP sent proves the pidfd names our child and not a
 * process that reused its pid since. A pidfd and not P_PID: a bare pid is safe only while Deno
 * cannot reap, i.e. within one turn of this thread (its reaper runs from this event loop), and the
 * wait spans turns; a pid reaped meanwhile could name another child of ours (another run's step),
 * whose stop or exit would pass for this one's. The children are read by pid, and the pidfd still
 * naming an unreaped process after the read proves `/proc/<pid>` was our child's throughout
 * (reaping is final, and only then is a pid free). They are live children of our stopped child:
 * none can be reaped (it runs no wait while stopped; only a leader ignoring SIGCHLD has the kernel
 * reap them), so no reused pid can be among them. (Past the bound the list is read from a leader
 * that may still run, as it always was then: best effort.)
 *
 * Resolves once the children are killed, to `settled`: the waitid's end (the pidfd closed then).
 */
/** How the wait for a leader's stop ended: its stop or exit seen, already reaped, or the bound. */
export type StopWait = "stopped" | "exited" | "gone" | "unknown" | "late";

async function killChildren(
  child: Deno.ChildProcess,
  uid: number,
): Promise<{ how: StopWait; settled: Promise<void> }> {
  const pidfd = pidfdOpen(child.pid);
  try {
    asSender(uid, () => child.kill("SIGSTOP"));
  } catch (e) {
    ignore(e, TypeError);
    if (pidfd >= 0) closeFd(pidfd);
    return { how: "gone", settled: Promise.resolve() }; // reaped already: nothing of its own is left to find
  }
  if (pidfd < 0) {
    // No fd to wait on (EMFILE): kill what is there now, in this turn (Deno reaps only from this
    // thread's event loop, so the pid is still our child's), without waiting for the stop.
    for (const k of childrenOf(child.pid)) kill(k, uid);
    cont(child, uid);
    return { how: "unknown", settled: Promise.resolve() };
  }
  // The waitid runs on a thread of Deno's blocking pool and returns at the stop, or at the exit,
  // or with ECHILD once Deno reaped the child. Past the bound (a leader in D state: the stop comes
  // only once it leaves D) stopGroup goes on to SIGCONT, which also discards the pending SIGSTOP,
  // then SIGTERM and SIGKILL, and awaits the exit: the exit wakes the waitid (a zombie's report,
  // or ECHILD once reaped), so the thread is held no longer than the child lives, and stopGroup
  // awaits `settled` too. The pidfd stays open until the waitid has returned: a closed fd number
  // can be reused by any open, and a waitid still queued would wait on that.
  const stop = stopOrExit(pidfd, uid);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), STOP_BOUND_MS));
  let how: StopWait = "late";
  try {
    how = await Promise.race([stop, late]);
    clearTimeout(timer);
    // Exited (or reaped): its children went to a reaper of their own, out of reach by this path.
    if (how !== "exited" && how !== "gone") {
      const kids = childrenOf(child.pid);
      if (alive(pidfd, uid) === 0) { for (const k of kids) kill(k, uid); }
    }
  } finally {
    cont(child, uid);
  }
  return { how, settled: stop.then(() => void closeFd(pidfd)) };
}

/** pidfdAlive as `uid`: a signal 0 is checked like any other (EPERM without the right to send). */
function alive(pidfd: number, uid: number): number {
  return asSender(uid, () => pidfdAlive(pidfd));
}

function kill(pid: number, uid: number): void {
  try {
    asSender(uid, () => Deno.kill(pid, "SIGKILL"));
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* gone */
  }
}

function cont(child: Deno.ChildProcess, uid: number): void {
  try {
    asSender(uid, () => child.kill("SIGCONT"));
  } catch (e) {
    ignore(e, TypeError); /* reaped */
  }
}

/**
 * Ends a step: its own children first (see killChildren), then SIGTERM to the group, SIGKILL after
 * the grace period; resolves once the leader is reaped, to how the wait for its stop ended. `uid`:
 * the uid the step runs as (after its setpriv), the signals' sender.
 */
export async function stopGroup(
  child: Deno.ChildProcess,
  graceMs = GRACE_MS,
  uid = 0,
): Promise<StopWait> {
  const { how, settled } = await killChildren(child, uid);
  signalStep(child, "SIGTERM", uid);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<"late">((r) => timer = setTimeout(() => r("late"), graceMs));
  const first = await Promise.race([child.status.then(() => "exited" as const), grace]);
  clearTimeout(timer);
  // Members that outlived the leader (or ignored SIGTERM) get SIGKILL either way.
  signalStep(child, "SIGKILL", uid);
  if (first === "late") await child.status;
  await settled; // the exit ended the stop wait, if nothing did before
  return how;
}

/** SIGKILLs whatever is left in a finished step's group (background children of the agent). */
export function reapGroup(child: Deno.ChildProcess, uid = 0): void {
  signalGroup(child.pid, "SIGKILL", uid);
}
