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

/** The one-letter state of `pid` (`/proc/<pid>/stat`), or null once it is gone. */
function stateOf(pid: number): string | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return null;
  }
}

/**
 * SIGKILLs the child's own children, read while it is stopped (no clone can be under way then).
 * The step's leader is bwrap's monitor and its child the sandbox init, which takes the whole pid
 * namespace with it. The monitor alone is not enough: killed right after its clone, before the
 * init has set its parent-death signal, the init lives on as an orphan in a session of its own,
 * runs the command and holds the step's stdout, so the cancelled run's session waits for it
 * (tests/runtime/chat_test.ts saw it under load). They are live children of our live child:
 * no reused pid can be among them.
 */
async function killChildren(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGSTOP");
  } catch {
    return; // reaped already: nothing of its own is left to find
  }
  try {
    for (let i = 0; i < 1000; i++) {
      const st = stateOf(child.pid);
      if (st === null || st === "T" || st === "Z") break;
      await new Promise((r) => setTimeout(r, 1)); // a stop takes effect within microseconds
    }
    let kids: string[] = [];
    try {
      kids = Deno.readTextFileSync(`/proc/${child.pid}/task/${child.pid}/children`).trim()
        .split(/\s+/).filter(Boolean);
    } catch { /* gone meanwhile */ }
    for (const k of kids) {
      try {
        Deno.kill(Number(k), "SIGKILL");
      } catch { /* gone */ }
    }
  } finally {
    try {
      child.kill("SIGCONT");
    } catch { /* gone */ }
  }
}

/**
 * Ends a step: its own children first (see killChildren), then SIGTERM to the group, SIGKILL after
 * the grace period; resolves once the leader is reaped.
 */
export async function stopGroup(child: Deno.ChildProcess, graceMs = GRACE_MS): Promise<void> {
  await killChildren(child);
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
