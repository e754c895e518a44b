/** Stopping an agent step's process group (its bwrap, started by src/sandbox/launch.ts spawnSandbox). */

/** Grace between SIGTERM and SIGKILL when stopping a group. */
export const GRACE_MS = 250;

function signalGroup(pgid: number, sig: Deno.Signal): boolean {
  try {
    Deno.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: the whole group is gone
  }
}

/**
 * The group, and the child itself: until the child's setsid(1) has run (a cancel can come right
 * after the spawn, and under load that takes long), its group does not exist yet and a signal to
 * the group alone reached nothing, leaving a step that a cancelled run still waited on. The
 * child's own signal goes through its handle, which refuses once it has been reaped (no pid reuse).
 */
function signalStep(child: Deno.ChildProcess, sig: Deno.Signal): void {
  signalGroup(child.pid, sig);
  try {
    child.kill(sig);
  } catch { /* reaped already */ }
}

/** SIGTERM to the group, SIGKILL after the grace period; resolves once the leader is reaped. */
export async function stopGroup(child: Deno.ChildProcess, graceMs = GRACE_MS): Promise<void> {
  signalStep(child, "SIGTERM");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<"late">((r) => timer = setTimeout(() => r("late"), graceMs));
  const first = await Promise.race([child.status.then(() => "exited" as const), grace]);
  clearTimeout(timer);
  // Members that outlived the leader (or ignored SIGTERM) get SIGKILL either way.
  signalStep(child, "SIGKILL");
  if (first === "late") await child.status;
}

/** SIGKILLs whatever is left in a finished step's group (background children of the agent). */
export function reapGroup(child: Deno.ChildProcess): void {
  signalGroup(child.pid, "SIGKILL");
}
