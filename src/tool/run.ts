/** runTsh: one tsh operation for an agent, run as tsh inside a fresh bubblewrap sandbox. */
import { isTshBuiltin } from "../abi/builtin.ts";
import { CtxError, toCtxError } from "../abi/errno.ts";
import { tshToolResult } from "../abi/frames.ts";
import { effectiveRlimits } from "../abi/rlimit.ts";
import { authorize } from "./authorize.ts";
import type { Letter } from "../policy/perm.ts";
import { agentEnv } from "../sandbox/env.ts";
import { launch } from "../sandbox/launch.ts";
import { requireSandbox } from "../sandbox/doctor.ts";
import type { Receipt } from "../sandbox/receipt.ts";
import { loadAgent } from "../store/agent.ts";
import permissions from "../program/permissions.json" with { type: "json" };
import { tshBundle } from "./bundle.ts";
import { toolCache } from "./config.ts";
import { DEFAULT_TIMEOUT_MS } from "./exec.ts";
import { failed, type ToolResult } from "./result.ts";
import { layoutOnce, type PreparedView, prepareView } from "./view.ts";

/** tsh's `tool_result` frame as a result; one off its shape is EIO (the sandbox wrote it). */
export function toolResultOf(frame: unknown): ToolResult {
  const p = tshToolResult.safeParse(frame);
  if (!p.success) {
    const i = p.error.issues[0];
    throw new CtxError(
      "EIO",
      `tsh sent a malformed tool_result: ${i?.path.join(".")}: ${i?.message}`,
    );
  }
  const { type: _, ...r } = p.data;
  return r;
}

/** Options for {@link runTsh}. */
export interface RunOptions {
  /** Host path of the /ctx tree (the mount, or a storage generation). */
  root: string;
  /** Agent name. */
  agent: string;
  /** The calling client's uid (its CTX_HOME). */
  uid: number;
  /**
   * What is bound at /workspace: an open directory fd (the client's own cwd, opened by the daemon
   * through `/proc/<peer>/cwd`; runTsh duplicates it) or a host path (tests, in-host callers).
   */
  workspace: string | { fd: number };
  /**
   * Host paths no sandbox may see (the run dir with the agent sockets, ...); the storage root
   * holding `root` is always among them.
   */
  hidden?: string[];
  /** The mount projecting `root` (production): a path into it names the tree too. */
  mount?: string;
  /** Session name (reserved for the runtime's records; tsh state is per agent home). */
  session?: string;
  /** Cancels the run: the sandbox init is killed. */
  signal?: AbortSignal;
  /** Tool output bound in bytes (default 16384). */
  limit?: number;
  /**
   * Wall-clock bound of the tool in seconds (default 120), given to tsh as `--timeout`: past it
   * tsh ends the tool's process group and answers ETIMEDOUT. The whole sandbox is bounded too,
   * by this plus {@link SANDBOX_SLACK_S}: should tsh itself hang, its sandbox init is killed.
   */
  timeout?: number;
  /** Host path backing HOME; default `<root>/home/<uid>/agent/<agent>` (pass it when root is read-only). */
  home?: string;
  /** The tsh bundle and the deno binary bound into the sandbox (defaults: built here, this deno). */
  bundle?: string;
  deno?: string;
  /** Receives the launch receipt before the command is released. */
  onReceipt?: (r: Receipt) => void;
  /**
   * The caller's CTX_TOOL_CACHE (the runtime passes its own): load/pin capacity, clamped
   * 1..1024, winning over `tool/tsh.d/config`. Given to tsh as `--cache`, never as a variable.
   */
  toolCache?: string;
  /**
   * Asked once per tool run after every check has passed (authority, the nofollow executable
   * check, mount policy, the view plan) and before anything spawns; only `true` runs the tool.
   * The runtime passes its approval step here (approval=ask). Built-ins of tsh are never asked.
   */
  approve?: (prepared: Prepared) => Promise<boolean>;
}

/** A tool run that passed every check and waits only for its approval and spawn. */
export interface Prepared {
  /** The tool name as typed (`args[0]`). */
  tool: string;
  /** The full tsh argv. */
  args: string[];
  /** The executable's view path (`/ctx/tool/fs.read`) that authorize() opened without following. */
  path: string;
  /** The perm letter the run consumes. */
  letter: Letter;
}

/** Where deno itself and the bundle appear inside the sandbox. */
export const SANDBOX_DENO = "/opt/cortexfs/bin/deno";
export const SANDBOX_TSH = "/opt/cortexfs/lib/tsh.js";

/**
 * How tsh runs inside a sandbox, for a tool call and an interactive terminal alike: the host's
 * deno and the bundle bound read-only at fixed paths, and the command line that runs the bundle
 * with tsh's own permission set (src/program/permissions.json) and nothing from outside.
 */
export function tshInSandbox(deno: string, bundle: string, args: readonly string[]) {
  return {
    binds: [
      { src: deno, dst: SANDBOX_DENO, mode: "ro" as const },
      { src: bundle, dst: SANDBOX_TSH, mode: "ro" as const },
    ],
    command: [
      SANDBOX_DENO,
      "run",
      "--quiet",
      "--no-config",
      "--no-lock",
      "--no-remote",
      "--no-npm",
      ...permissions.tsh,
      SANDBOX_TSH,
      ...args,
    ],
  };
}

/**
 * Processes tsh may use beyond the agent's nproc: its own threads (Deno starts about a dozen and
 * adds more on demand). A tool at its limit fails its own forks; tsh still answers.
 */
export const TSH_NPROC_HEADROOM = 64;

/** Seconds the sandbox may run beyond the tool's timeout (tsh start-up, the kill grace). */
export const SANDBOX_SLACK_S = 10;
/** The kernel's bound on one argv string (MAX_ARG_STRLEN, NUL included). */
const MAX_ARG = 131072;

/** Deno's own needs: a private cache on the sandbox tmpfs, no update check, no colour. These
 * reach the deno process only; tsh cannot read them (not in its --allow-env) and never passes
 * them on: tool environments are rebuilt from the allowlist. */
const DENO_ENV = { DENO_DIR: "/tmp/.deno", DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };

/**
 * Runs `tsh --json ARGS` for `agent` inside its sandbox and returns the tool result. A tool run
 * is authorized here first (so a denied call spawns nothing) and again by tsh inside.
 */
export async function runTsh(args: string[], options: RunOptions): Promise<ToolResult> {
  const name = args[0] ?? "tsh";
  // One signal for launch: the caller's cancellation, or the sandbox's own wall-clock bound.
  const guard = new AbortController();
  const stop = () => guard.abort();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let view: PreparedView | undefined;
  try {
    const timeout = options.timeout ?? DEFAULT_TIMEOUT_MS / 1000;
    if (!(Number.isFinite(timeout) && timeout > 0)) {
      throw new CtxError("EINVAL", `timeout must be a positive number of seconds, not ${timeout}`);
    }
    for (const a of args) {
      if (new TextEncoder().encode(a).length >= MAX_ARG) {
        throw new CtxError("E2BIG", `a tsh argument is over ${MAX_ARG - 1} bytes (the exec bound)`);
      }
    }
    await requireSandbox();
    const root = Deno.realPathSync(options.root);
    options = { ...options, root };
    // Every control parsed fresh by the one loader (src/store/agent.ts), aliases resolved.
    const agent = loadAgent(root, options.agent, { secrets: false }); // tools never get env
    let prepared: Prepared | undefined;
    if (args.length && !isTshBuiltin(args[0])) {
      // authorize() includes the executable's nofollow open and inode identity check.
      const v = authorize({ agent: agent.name, tool: args[0], root, uid: options.uid }, { agent });
      if (!v.allow) return failed(name, new CtxError(v.errno, v.reason));
      prepared = { tool: args[0], args: [...args], path: v.tool.path, letter: v.tool.letter };
    }
    const cache = toolCache(options.toolCache);
    view = prepareView(agent, options);
    const limit = options.limit ?? 16384;
    const bundle = options.bundle ?? await tshBundle({ deno: options.deno });
    const deno = options.deno ?? Deno.execPath();
    const env = agentEnv({
      agent: agent.name,
      subject: agent.subject,
      uid: options.uid,
      ctxPath: agent.path,
    });
    // Every check above has passed: only now may a human be asked, and only a yes spawns.
    if (prepared && options.approve && !await options.approve(prepared)) {
      throw new CtxError("EACCES", `approval for ${prepared.tool} was not granted (fail closed)`);
    }
    if (options.signal?.aborted) throw new CtxError("ECANCELED", "run cancelled before spawn");
    options.signal?.addEventListener("abort", stop, { once: true });
    timer = setTimeout(stop, (timeout + SANDBOX_SLACK_S) * 1000);
    const res = await launch({
      ...view.spec,
      nprocHeadroom: TSH_NPROC_HEADROOM,
      env: { ...env, ...DENO_ENV },
      ...tshInSandbox(deno, bundle, [
        "--json",
        "--limit",
        String(limit),
        "--timeout",
        String(timeout),
        "--nproc",
        String(effectiveRlimits(agent.rlimit).nproc),
        ...(cache === undefined ? [] : ["--cache", String(cache)]),
        // The words travel on stdin: a command line is readable by every local user.
        "--args-stdin",
      ]),
    }, {
      stdin: new TextEncoder().encode(JSON.stringify(args)),
      signal: guard.signal,
      onReceipt: options.onReceipt,
      limit: 4 * limit + 65536,
      layout: layoutOnce(),
    });
    const text = new TextDecoder().decode(res.stdout);
    for (const line of text.split("\n")) {
      if (!line.startsWith("{")) continue;
      const f = JSON.parse(line);
      if (f?.type === "tool_result") return toolResultOf(f);
    }
    const err = new TextDecoder().decode(res.stderr).trim();
    throw new CtxError(
      "EIO",
      `tsh produced no tool_result (exit ${res.code}): ${err.slice(0, 2000)}`,
    );
  } catch (e) {
    const err = toCtxError(e);
    if (err.errno === "ECANCELED" && guard.signal.aborted && !options.signal?.aborted) {
      return failed(
        name,
        new CtxError(
          "ETIMEDOUT",
          "the tool's sandbox outlived its wall-clock bound and was killed",
        ),
      );
    }
    return failed(name, err);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", stop);
    view?.close();
  }
}
