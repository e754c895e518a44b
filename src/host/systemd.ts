/** The systemd path of the supervisor: where a manager answers, an instance runs as a transient scope (`systemd-run --scope`), its receipt carries the manager's InvocationID, and a stop goes through `systemctl stop`. */
import { CtxError, ignore } from "../abi/errno.ts";
import { systemTool } from "../sandbox/launch.ts";
import {
  type InstanceReceipt,
  receiptSeen,
  type StopOptions,
  type Stopped,
  stopVerified,
} from "./receipt.ts";

/** A systemd manager that answered, and the tools that speak to it. */
export interface Manager {
  /** `systemd-run`. */
  run: string;
  /** `systemctl`. */
  ctl: string;
  /** What `systemctl show -p Version --value` answered. */
  version: string;
}

/** How cortexfsd picks its supervisor (`--supervisor`). */
export type SupervisorMode = "auto" | "builtin" | "systemd";

/** Longest a manager query may take before it counts as not answering (ms). */
const ASK_MS = 10_000;

/**
 * True where a systemd manager runs as init (`/run/systemd/system` is a directory, as
 * sd_booted() checks). Nothing is executed.
 */
export function systemdBooted(): boolean {
  try {
    return Deno.lstatSync("/run/systemd/system").isDirectory;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/** Runs `systemctl ARGS`; its stdout trimmed, or null when it failed or did not answer in time. */
export async function ask(m: Pick<Manager, "ctl">, args: string[]): Promise<string | null> {
  try {
    const out = await new Deno.Command(m.ctl, {
      args,
      stdin: "null",
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(ASK_MS),
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.PermissionDenied, DOMException);
    return null;
  }
}

/**
 * The manager the supervisor uses, or null for the built-in supervisor. `builtin`: null, nothing
 * run. `auto`: a manager only where one is booted (sd_booted) and `systemctl` (found at an
 * absolute path, never through PATH) answers. `systemd`: the same, but its absence is an error.
 * `tools` (cortexfsd `--systemd-tools DIR`, an explicit override only: tests put fakes there)
 * takes `DIR/systemd-run` and `DIR/systemctl` and skips the sd_booted check; they must answer.
 */
export async function detectManager(
  options: { mode?: SupervisorMode; tools?: string } = {},
): Promise<Manager | null> {
  const mode = options.mode ?? "auto";
  if (mode === "builtin") return null;
  let run: string | undefined, ctl: string | undefined;
  if (options.tools !== undefined) {
    run = `${options.tools}/systemd-run`;
    ctl = `${options.tools}/systemctl`;
  } else if (systemdBooted()) {
    run = systemTool("systemd-run");
    ctl = systemTool("systemctl");
  }
  const version = run && ctl ? await ask({ ctl }, ["show", "-p", "Version", "--value"]) : null;
  if (run && ctl && version) return { run, ctl, version };
  if (mode === "systemd" || options.tools !== undefined) {
    throw new CtxError(
      "ENOTSUP",
      options.tools !== undefined
        ? `no systemd manager answers through ${options.tools}/systemctl`
        : "no systemd manager answers here (/run/systemd/system, systemctl show)",
    );
  }
  return null;
}

/**
 * The argv prefix that runs `argv` in the transient scope `unit`: `systemd-run --scope` registers
 * the scope for its own pid and execs the command in place, so the pid, the inherited fds (the
 * listening socket as fd 3) and the stdio pipes stay the spawner's. A stop has `graceMs` before
 * the manager's SIGKILL; `--collect` unloads a failed scope too.
 */
export function scopeArgv(
  m: Manager,
  unit: string,
  options: { graceMs: number },
): string[] {
  return [
    m.run,
    "--scope",
    `--unit=${unit}`,
    "--quiet",
    "--collect",
    `--property=TimeoutStopSec=${options.graceMs}ms`,
    "--",
  ];
}

/** The unit's current InvocationID (32 hex digits), or null. */
export async function invocationOf(m: Manager, unit: string): Promise<string | null> {
  const id = await ask(m, ["show", "-p", "InvocationID", "--value", unit]);
  return id && /^[0-9a-f]{32}$/.test(id) ? id : null;
}

/**
 * Stops a systemd receipt's unit: only when the receipt still matches its process (pid, start
 * time, boot) and the unit still has the receipt's InvocationID (else `stale`, nothing asked);
 * then `systemctl stop UNIT`, and SIGKILL to the group after the grace if it still lives.
 */
export async function stopUnit(
  m: Manager,
  r: InstanceReceipt,
  options: StopOptions,
): Promise<Stopped> {
  // our own child (an exit event) keeps its pid until reaped: only `gone` stops that (stopVerified)
  const now = receiptSeen(r);
  if (now === "gone") return "stale";
  if (now === "unknown" && !options.exited) return "unchecked";
  if ((await invocationOf(m, r.unit)) !== r.invocation) return "stale";
  return await stopVerified(r, {
    ...options,
    terminate: () => void ask(m, ["stop", r.unit]),
  });
}

/** The stop a receipt calls for: its unit's through the manager, else signals (stopVerified). */
export function stopperOf(
  m: Manager | null,
): (r: InstanceReceipt, o: StopOptions) => Promise<Stopped> {
  return (r, o) => r.manager === "systemd" && m ? stopUnit(m, r, o) : stopVerified(r, o);
}
