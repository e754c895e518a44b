/** The agent terminal's program: interactive tsh inside the agent's bubblewrap sandbox, built in ctxterm's own process (it holds the view's fds). */
import { CtxError, ignore } from "../abi/errno.ts";
import { effectiveRlimits } from "../abi/rlimit.ts";
import { requireSandbox } from "../sandbox/doctor.ts";
import { agentEnv } from "../sandbox/env.ts";
import { launchArgv } from "../sandbox/launch.ts";
import { loadAgent } from "../store/agent.ts";
import { resolvePaths } from "../store/paths.ts";
import { tshBundle } from "../tool/bundle.ts";
import { TSH_NPROC_HEADROOM, tshInSandbox } from "../tool/run.ts";
import { layoutOnce, prepareView } from "../tool/view.ts";
import type { FsId } from "../sys/fsid.ts";
import { close } from "../sys/libc.ts";

/** Where the sandbox's shell keeps its line history (in the agent home, never the workspace). */
export const HISTORY = "/home/agent/.tsh_history";

/** What {@link agentShell} needs. */
export interface ShellPlan {
  /** Host path of the tree. */
  root: string;
  agent: string;
  /** The client uid whose home holds the agent home (`home/<uid>/agent/<agent>`). */
  uid: number;
  /**
   * Bound read-write at /workspace (its `.git` read-only): a host directory, or an open directory
   * fd (a supervised terminal: the requester's cwd, opened by the host from `/proc/<pid>/cwd`).
   */
  workspace: string | { fd: number };
  env: Record<string, string | undefined>;
}

/** The program ctxterm runs for an agent terminal, and what to release when it is gone. */
export interface AgentShell {
  /** `bash -c <gate> ... setpriv ... bwrap ... -- prlimit ... deno run tsh.js` */
  argv: string[];
  /** The launcher's own environment (bwrap builds the sandbox's from empty: --clearenv). */
  env: Record<string, string>;
  /** The view's fds the gate in `argv` takes over: the spawn must pass them at these numbers. */
  fds: number[];
  /** The identity session files are written as (the agent's). */
  as: FsId;
  /** Closes the view's fds and removes the synthetic passwd/group. */
  cleanup(): void;
}

/** Deno's own needs inside (as runTsh gives them): a private cache, no update check. */
const DENO_ENV = { DENO_DIR: "/tmp/.deno", DENO_NO_UPDATE_CHECK: "1" };

/**
 * Builds the seed's sandbox contract for an interactive terminal: the caller's directory at
 * /workspace (rw, `.git` ro), HOME=/home/agent backed by the agent home, an empty environment
 * plus the allowlist, no `--new-session` (the shell keeps the PTY as its controlling terminal),
 * `--die-with-parent` (it ends with ctxterm). The view is prepared here, in the process that
 * spawns bwrap: the gate inherits the view's fds (`fds`, passed by the PTY spawn).
 */
export async function agentShell(p: ShellPlan): Promise<AgentShell> {
  await requireSandbox();
  const root = Deno.realPathSync(p.root);
  const agent = loadAgent(root, p.agent, { secrets: false }); // a terminal never gets env secrets
  const run = resolvePaths({ env: p.env }).run;
  const view = prepareView(agent, { root, uid: p.uid, workspace: p.workspace, hidden: [run] });
  const dataDir = Deno.makeTempDirSync({ prefix: "cortexfs-term-" });
  let argsFd = -1; // the environment's fd (launchArgv's envFd), held until the spawn is over
  const cleanup = () => {
    if (argsFd >= 0) close(argsFd);
    argsFd = -1;
    view.close();
    try {
      Deno.removeSync(dataDir, { recursive: true });
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone */
    }
  };
  try {
    Deno.chmodSync(dataDir, 0o711); // bwrap runs as the agent uid: it reads these files
    const bundle = await tshBundle();
    const env = agentEnv({
      agent: agent.name,
      subject: agent.subject,
      uid: p.uid,
      ctxPath: agent.path,
    });
    const { argv, data, fds, envFd } = launchArgv({
      ...view.spec,
      nprocHeadroom: TSH_NPROC_HEADROOM,
      env: { ...env, ...DENO_ENV },
      ...tshInSandbox(Deno.execPath(), bundle, [
        "--nproc",
        String(effectiveRlimits(agent.rlimit).nproc),
        "--history",
        HISTORY,
      ]),
    }, { dataDir, layout: layoutOnce(), dieWithParent: true, gated: false, newSession: false });
    argsFd = envFd;
    for (const [name, text] of Object.entries(data)) {
      Deno.writeTextFileSync(`${dataDir}/${name}`, text, { mode: 0o444 });
      Deno.chmodSync(`${dataDir}/${name}`, 0o444);
    }
    return {
      argv,
      env: { PATH: "/usr/bin:/bin" },
      fds,
      as: { uid: agent.uid, gid: agent.gid, groups: agent.groups },
      cleanup,
    };
  } catch (e) {
    cleanup();
    throw e instanceof CtxError ? e : new CtxError("EIO", String(e));
  }
}
