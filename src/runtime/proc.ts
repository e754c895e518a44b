/** Agent processes in their own process group (via util-linux `setsid`), stoppable as a group. */
import { CtxError } from "../abi/errno.ts";

/** Grace between SIGTERM and SIGKILL when stopping a group. */
export const GRACE_MS = 250;

let setsidPath: string | undefined;

function setsid(): string {
  if (setsidPath) return setsidPath;
  for (const p of ["/usr/bin/setsid", "/bin/setsid"]) {
    try {
      if (Deno.statSync(p).isFile) return setsidPath = p;
    } catch { /* try the next */ }
  }
  throw new CtxError("ENOSYS", "setsid (util-linux) is not installed");
}

/** Options for {@link spawnGroup}. */
export interface SpawnOptions {
  /** The complete environment: nothing of the daemon's is inherited. */
  env: Record<string, string>;
  cwd: string;
  uid?: number;
  gid?: number;
}

/**
 * Starts `program` as the leader of a new session and process group: `setsid` is not a group
 * leader when Deno forks it, so it calls setsid(2) and execs in place (pid == pgid).
 */
export function spawnGroup(program: string, options: SpawnOptions): Deno.ChildProcess {
  const root = Deno.uid() === 0;
  return new Deno.Command(setsid(), {
    args: [program],
    env: options.env,
    clearEnv: true,
    cwd: options.cwd,
    uid: root && options.uid !== undefined && options.uid !== 0 ? options.uid : undefined,
    gid: root && options.gid !== undefined && options.gid !== 0 ? options.gid : undefined,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

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
