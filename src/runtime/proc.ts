/** Agent processes as their identity (`setpriv`) in their own process group (`setsid`), stoppable as a group. */
import { CtxError } from "../abi/errno.ts";

/** Grace between SIGTERM and SIGKILL when stopping a group. */
export const GRACE_MS = 250;

const tools = new Map<string, string>();

/** Absolute path of a util-linux tool (never looked up through a PATH). */
function tool(name: string): string {
  const have = tools.get(name);
  if (have) return have;
  for (const p of [`/usr/bin/${name}`, `/bin/${name}`]) {
    try {
      if (Deno.statSync(p).isFile) {
        tools.set(name, p);
        return p;
      }
    } catch { /* try the next */ }
  }
  throw new CtxError("ENOSYS", `${name} (util-linux) is not installed`);
}

/** Options for {@link spawnGroup}. */
export interface SpawnOptions {
  /** The complete environment: nothing of the daemon's is inherited. */
  env: Record<string, string>;
  cwd: string;
  /** The agent identity: exactly these ids, also when they are 0. */
  uid: number;
  gid: number;
  /** Supplementary groups: exactly these (none when empty), never the daemon's. */
  groups: readonly number[];
}

/**
 * The argv that starts `program` as the given identity in a new session and process group:
 * `setsid` (not a group leader when Deno forks it, so it calls setsid(2) and execs in place:
 * pid == pgid), then `setpriv` (setresuid/setresgid with the saved ids too, and setgroups: the
 * exact groups or none), then the program. A daemon that is not root cannot change identity:
 * it runs agents of its own uid/gid only (EPERM for any other).
 */
export function groupArgv(program: string, o: SpawnOptions): string[] {
  if (Deno.uid() !== 0) {
    if (o.uid !== Deno.uid() || o.gid !== Deno.gid()) {
      throw new CtxError(
        "EPERM",
        `this daemon runs as uid ${Deno.uid()} and cannot start an agent as ${o.uid}:${o.gid}`,
      );
    }
    return [tool("setsid"), program];
  }
  const groups = o.groups.length ? [`--groups=${o.groups.join(",")}`] : ["--clear-groups"];
  return [
    tool("setsid"),
    tool("setpriv"),
    `--reuid=${o.uid}`,
    `--regid=${o.gid}`,
    ...groups,
    "--",
    program,
  ];
}

/** Starts `program` as the leader of a new session and process group, as the agent identity. */
export function spawnGroup(program: string, options: SpawnOptions): Deno.ChildProcess {
  const [cmd, ...args] = groupArgv(program, options);
  return new Deno.Command(cmd, {
    args,
    env: options.env,
    clearEnv: true,
    cwd: options.cwd,
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
