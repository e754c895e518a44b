/** Agent processes as their identity (`setpriv`) in their own process group (`setsid`), stoppable as a group. */
import { CtxError } from "../abi/errno.ts";
import { CLOSE_FDS } from "../sandbox/launch.ts";

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

// Runs as the agent identity, after setpriv: closes inherited fds above 2, enters the workspace
// (as the agent: a directory it cannot enter fails the start, exit 126), then execs the program
// through `env -i` with exactly the agent's environment. Nothing of the agent's environment is
// ever seen by a process running as root (LD_PRELOAD in `.d/env` reaches only the agent).
const LAUNCH = `${CLOSE_FDS}
cd -- "$1" || exit 126
shift
vars=()
while [ "$1" != "--" ]; do vars+=("$1"); shift; done
shift
exec /usr/bin/env -i "\${vars[@]}" "$@"`;

/**
 * The argv that starts `program` as the given identity in a new session and process group:
 * `setsid` (not a group leader when Deno forks it, so it calls setsid(2) and execs in place:
 * pid == pgid), then `setpriv` (setresuid/setresgid with the saved ids too, and setgroups: the
 * exact groups or none), then the launch script above. setsid and setpriv run as root with an
 * environment of PATH alone. A daemon that is not root cannot change identity: it runs agents of
 * its own uid/gid only (EPERM for any other).
 */
export function groupArgv(program: string, o: SpawnOptions): string[] {
  if (program.includes("=") || !program.startsWith("/")) {
    throw new CtxError("EINVAL", `agent program path "${program}" must be absolute without "="`);
  }
  const vars = Object.entries(o.env).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || v.includes("\0")) {
      throw new CtxError("EINVAL", `agent environment entry "${k}" is not KEY=VALUE`);
    }
    return `${k}=${v}`;
  });
  const launch = [tool("bash"), "-c", LAUNCH, "cortexfs-agent", o.cwd, ...vars, "--", program];
  if (Deno.uid() !== 0) {
    if (o.uid !== Deno.uid() || o.gid !== Deno.gid()) {
      throw new CtxError(
        "EPERM",
        `this daemon runs as uid ${Deno.uid()} and cannot start an agent as ${o.uid}:${o.gid}`,
      );
    }
    return [tool("setsid"), ...launch];
  }
  const groups = o.groups.length ? [`--groups=${o.groups.join(",")}`] : ["--clear-groups"];
  return [
    tool("setsid"),
    tool("setpriv"),
    `--reuid=${o.uid}`,
    `--regid=${o.gid}`,
    ...groups,
    "--",
    ...launch,
  ];
}

/** Starts `program` as the leader of a new session and process group, as the agent identity. */
export function spawnGroup(program: string, options: SpawnOptions): Deno.ChildProcess {
  const [cmd, ...args] = groupArgv(program, options);
  return new Deno.Command(cmd, {
    args,
    env: { PATH: "/usr/bin:/bin" },
    clearEnv: true,
    cwd: "/", // the workspace is entered by the launch script, as the agent
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
