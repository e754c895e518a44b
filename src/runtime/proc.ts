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

/** SIGTERM to the group, SIGKILL after the grace period; resolves once the leader is reaped. */
export async function stopGroup(child: Deno.ChildProcess, graceMs = GRACE_MS): Promise<void> {
  signalGroup(child.pid, "SIGTERM");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<"late">((r) => timer = setTimeout(() => r("late"), graceMs));
  const first = await Promise.race([child.status.then(() => "exited" as const), grace]);
  clearTimeout(timer);
  // Members that outlived the leader (or ignored SIGTERM) get SIGKILL either way.
  signalGroup(child.pid, "SIGKILL");
  if (first === "late") await child.status;
}

/** SIGKILLs whatever is left in a finished step's group (background children of the agent). */
export function reapGroup(child: Deno.ChildProcess): void {
  signalGroup(child.pid, "SIGKILL");
}
