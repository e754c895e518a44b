/** Instance receipts under `<run>/instance/`: what the host proves about an agent instance before releasing it, and the stop that trusts only them. */
import { ignore, toCtxError } from "../abi/errno.ts";
import { bootId, pinProcess, type Seen, seen, startTime } from "../sandbox/receipt.ts";
import { ensureDir, replaceFile, tempPath } from "../store/atomic.ts";
import { readRegularText } from "../store/regular.ts";
import { closeFd } from "../sys/sock.ts";
import { waitExits } from "../sys/wait.ts";

/** Schema tag of an instance receipt. */
export const INSTANCE_SCHEMA = "cortexfs.instance-receipt/v1";

/** One agent runtime instance (or terminal unit), recorded after its spawn and before it is released. */
export interface InstanceReceipt {
  schema: typeof INSTANCE_SCHEMA;
  /**
   * The unit name a systemd manager would give it: `cortexfs-agent-<name>` (the agent instance) or
   * `cortexfs-term-<name>-<session>` (the session's supervised terminal, {@link terminalUnit}).
   */
  unit: string;
  /** 128-bit random hex: this invocation, never reused. */
  invocation: string;
  agent: string;
  pid: number;
  /** The instance leads its own session and process group (setsid): pgid == pid. */
  pgid: number;
  /** Field 22 of `/proc/<pid>/stat` (after the last `)`), as text. */
  start_time: string;
  /** `/proc/sys/kernel/random/boot_id`. */
  boot_id: string;
  /** The uid the instance runs as. */
  uid: number;
  /** When the host released it (unix seconds). */
  started_at: number;
  /**
   * `systemd`: the instance runs in a transient scope unit of a systemd manager (`unit` is that
   * scope, {@link scopeUnit}; `invocation` the manager's InvocationID). Absent: the built-in
   * supervisor's own unit name and invocation.
   */
  manager?: "systemd";
  /** A terminal unit: its session, terminal id, and the uid that may attach (the requester). */
  session?: string;
  terminal?: string;
  owner?: number;
}

/** The unit name of an agent session's supervised terminal. */
export function terminalUnit(agent: string, session: string): string {
  return `cortexfs-term-${agent}-${session}`;
}

/**
 * The transient scope a systemd manager runs an instance in: `<unit>.scope`, every character a
 * unit name may not hold (agent names may hold `+`) escaped as systemd-escape does (`\x2b`).
 */
export function scopeUnit(unit: string): string {
  const esc = unit.replace(
    /[^A-Za-z0-9:_.-]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
  return `${esc}.scope`;
}

/** The receipts directory: `<run>/instance` (root's alone). */
export function receiptsDir(run: string): string {
  return `${run}/instance`;
}

/** A fresh 128-bit invocation id (32 hex digits). */
export function newInvocation(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

let boot: string | undefined;
/** The boot id, read once (it cannot change while this process lives). */
export function thisBoot(): string {
  return boot ??= bootId();
}

/**
 * Builds the receipt of a just-spawned (and still held) instance from `/proc`; undefined when the
 * process is already gone (then there is nothing to prove).
 */
export function receiptOf(
  agent: string,
  pid: number,
  options: { uid: number; invocation?: string; unit?: string },
): InstanceReceipt | undefined {
  let start: string;
  try {
    start = startTime(pid);
  } catch (e) {
    ignore(e, "ESRCH");
    return undefined;
  }
  return {
    schema: INSTANCE_SCHEMA,
    unit: options.unit ?? `cortexfs-agent-${agent}`,
    invocation: options.invocation ?? newInvocation(),
    agent,
    pid,
    pgid: pid,
    start_time: start,
    boot_id: thisBoot(),
    uid: options.uid,
    started_at: Date.now() / 1000,
  };
}

/**
 * Writes `<dir>/<file>.json` (default the agent's name; a terminal's is its session) atomically
 * (temp + rename, 0600); no fsync: it proves only this boot.
 */
export function writeReceipt(dir: string, r: InstanceReceipt, file = r.agent): string {
  ensureDir(dir, 0o700);
  const path = `${dir}/${file}.json`;
  const tmp = tempPath(path);
  try {
    Deno.writeTextFileSync(tmp, JSON.stringify(r) + "\n", { mode: 0o600, createNew: true });
    Deno.renameSync(tmp, path);
  } catch (e) {
    dropReceipt(tmp);
    throw toCtxError(e, path);
  }
  return path;
}

/**
 * Projects a receipt into `meta.json` at `path` under the key `receipt` (the other keys, the
 * definition's descriptive JSON, are kept): a summary like status/pid, atomic, not fsynced; owner
 * and mode stay the file's. A gone agent (ENOENT) is no failure.
 */
export function projectReceipt(path: string, receipt: InstanceReceipt & { exit?: unknown }): void {
  let cur: Record<string, unknown> = {};
  try {
    const v = JSON.parse(readRegularText(path) ?? "{}");
    if (v && typeof v === "object" && !Array.isArray(v)) cur = v;
  } catch { /* unreadable: the receipt alone */ }
  try {
    replaceFile(path, JSON.stringify({ ...cur, receipt }, null, 2) + "\n", { sync: false });
  } catch (e) {
    ignore(e, "ENOENT"); /* the agent may be gone */
  }
}

/** Removes a receipt file (missing is fine). */
export function dropReceipt(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* already gone */
  }
}

/** Parses a receipt; undefined for anything that is not one (a stale or planted file). */
export function parseReceipt(text: string): InstanceReceipt | undefined {
  try {
    const r = JSON.parse(text);
    const ok = r?.schema === INSTANCE_SCHEMA && typeof r.agent === "string" &&
      Number.isInteger(r.pid) && r.pid > 1 && r.pgid === r.pid &&
      typeof r.start_time === "string" && /^\d+$/.test(r.start_time) &&
      typeof r.boot_id === "string" && typeof r.invocation === "string" &&
      /^[0-9a-f]{32}$/.test(r.invocation) && (r.session === undefined
        ? (r.manager === undefined && r.unit === `cortexfs-agent-${r.agent}`) ||
          (r.manager === "systemd" && r.unit === scopeUnit(`cortexfs-agent-${r.agent}`))
        : r.manager === undefined && typeof r.session === "string" &&
          r.unit === terminalUnit(r.agent, r.session));
    return ok ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Reads `<dir>/<agent>.json` (regular files only: a FIFO never stalls the host). */
export function readReceipt(path: string): InstanceReceipt | undefined {
  try {
    return parseReceipt(readRegularText(path) ?? "");
  } catch (e) {
    ignore(e, "EIO", "ELOOP", "EFBIG");
    return undefined;
  }
}

/**
 * What a check of the receipt's pid finds: `live` while it is the same process (same boot, same
 * start time, not a zombie), `gone`, or `unknown` when /proc could not be read (EMFILE).
 */
export function receiptSeen(r: InstanceReceipt): Seen {
  return seen(r.pid, r.start_time, r.boot_id);
}

/** True while the receipt's pid is the same live process (same boot, same start time, not a zombie). */
export function receiptMatches(r: InstanceReceipt): boolean {
  return receiptSeen(r) === "live";
}

function signal(pgid: number, sig: Deno.Signal): void {
  try {
    Deno.kill(-pgid, sig);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* ESRCH: the group is gone */
  }
}

/**
 * How {@link stopVerified} ended: `unchecked` when /proc could not be read (EMFILE) where the
 * receipt had to be checked before a signal, so nothing more was sent and the receipt stands.
 */
export type Stopped = "exited" | "killed" | "stale" | "unchecked";

/** Options of {@link stopVerified}. */
export interface StopOptions {
  graceMs: number;
  /**
   * The caller's exit event; without one (the process is not our child) its exit is waited for
   * through a pidfd.
   */
  exited?: Promise<unknown>;
  /**
   * Asks it to end instead of SIGTERM to its group (a systemd unit: `systemctl stop`); the
   * SIGKILL after the grace stays the receipt's.
   */
  terminate?: () => void;
}

/**
 * Stops what the receipt proves: nothing when the pid is gone or now names another process
 * (`stale`); else SIGTERM to the instance's group (or `terminate`), then SIGKILL after `graceMs`
 * unless it exits first (`exited`, else `killed` once it is gone after the SIGKILL).
 *
 * Without the caller's exit event (a killed host's orphan instance: not our child, so waitid
 * cannot see it) the exit is its pidfd turning readable, waited for off the JS thread with the
 * grace as the poll's timeout ({@link waitExits}). The pidfd is opened before the receipt is
 * checked ({@link pinProcess}), so it names the recorded process and no later one with its pid;
 * it is closed once no poll on it is left. Without a pidfd (EMFILE) the grace alone is waited,
 * and the SIGKILL (if it still matches then) is not followed by a wait.
 */
export async function stopVerified(r: InstanceReceipt, options: StopOptions): Promise<Stopped> {
  const exit = options.exited ?? pinProcess(r.pid, () => receiptSeen(r));
  if (exit === "stale") return "stale";
  // A verified pidfd proves it. Our own child (an exit event) keeps its pid until it is reaped,
  // so only `gone` stops that. Without a verified pidfd (EMFILE): signalled only when seen live.
  const now = typeof exit === "number" && exit >= 0 ? "live" : receiptSeen(r);
  if (now === "gone") return "stale";
  if (now === "unknown" && typeof exit === "number") return "unchecked";
  try {
    if (options.terminate) options.terminate();
    else signal(r.pgid, "SIGTERM");
    return typeof exit === "number"
      ? await pidfdGrace(r, exit, options.graceMs)
      : await eventGrace(r, exit, options.graceMs);
  } finally {
    if (typeof exit === "number" && exit >= 0) closeFd(exit); // every poll on it has returned
  }
}

/** The wait after the SIGTERM on the caller's exit event: `exited` within the grace, else SIGKILL. */
async function eventGrace(
  r: InstanceReceipt,
  exited: Promise<unknown>,
  graceMs: number,
): Promise<Stopped> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((res) => timer = setTimeout(() => res("late"), graceMs));
  const why = await Promise.race([exited.then(() => "gone" as const), late]);
  clearTimeout(timer);
  if (why === "gone") return "exited";
  // It matched a grace period ago and Linux hands out pids cyclically: the group is still its
  // (our child: its pid stays its until reaped, even where /proc cannot be read now).
  if (receiptSeen(r) !== "gone") signal(r.pgid, "SIGKILL");
  await exited;
  return "killed";
}

/**
 * The wait after the SIGTERM on the pidfd `fd` (negative: none to be had, the grace alone):
 * `exited` within the grace, else SIGKILL and `killed` once the pidfd tells it is gone.
 */
async function pidfdGrace(r: InstanceReceipt, fd: number, graceMs: number): Promise<Stopped> {
  if (fd < 0) {
    await new Promise((res) => setTimeout(res, graceMs));
    const now = receiptSeen(r);
    if (now === "gone") return "exited";
    if (now === "unknown") return "unchecked"; // asked to end; no SIGKILL on an unproven pid
  } else if ((await waitExits([fd], graceMs)).length === 0) return "exited";
  // Running at the grace's end (its pidfd says so), so it holds its pid and its group id still;
  // the receipt is checked again all the same, as on the event path.
  if (receiptSeen(r) !== "gone") signal(r.pgid, "SIGKILL");
  if (fd >= 0) await waitExits([fd], -1); // returns once it is gone, as the SIGKILL makes it
  return "killed";
}

/** What {@link reapReceipts} did. */
export interface ReapedInstances {
  /** Agents whose instance (left by a killed host) still matched its receipt and was stopped. */
  stopped: string[];
  /** Receipts dropped without a signal: process gone, pid reused, other boot, or unreadable. */
  stale: string[];
  /**
   * Receipts kept: /proc could not be read to check them (EMFILE), so nothing is proven either
   * way (nothing signalled, or no SIGKILL after the SIGTERM); the next reap looks again.
   */
  unchecked: string[];
}

/**
 * At host start: every receipt a killed host left is verified; a live match is stopped (SIGTERM,
 * SIGKILL after the grace), a stale one is cleared, nothing else is touched. Every receipt is removed.
 */
export async function reapReceipts(
  dir: string,
  options: {
    graceMs: number;
    onReaped?: (agent: string, live: boolean, r: InstanceReceipt) => void;
    /** How a live match is stopped (default {@link stopVerified}; a systemd unit's differs). */
    stop?: (r: InstanceReceipt, o: StopOptions) => Promise<Stopped>;
  },
): Promise<ReapedInstances> {
  ensureDir(dir, 0o700);
  const out: ReapedInstances = { stopped: [], stale: [], unchecked: [] };
  const jobs: Promise<void>[] = [];
  for (const e of Deno.readDirSync(dir)) {
    if (!e.name.endsWith(".json")) continue;
    const path = `${dir}/${e.name}`;
    const r = e.isFile ? readReceipt(path) : undefined;
    const now = r ? receiptSeen(r) : "gone";
    if (now === "unknown") {
      out.unchecked.push(e.name);
      continue;
    }
    if (!r || now === "gone") {
      out.stale.push(e.name);
      dropReceipt(path);
      if (r) options.onReaped?.(r.agent, false, r);
      continue;
    }
    jobs.push((async () => {
      const how = await (options.stop ?? stopVerified)(r, { graceMs: options.graceMs });
      if (how === "unchecked") {
        out.unchecked.push(e.name);
        return;
      }
      // `stale` here: the stop found it is not ours after all (a unit with another invocation).
      if (how === "stale") out.stale.push(e.name);
      else out.stopped.push(r.agent);
      dropReceipt(path);
      options.onReaped?.(r.agent, how !== "stale", r);
    })());
  }
  await Promise.all(jobs);
  out.stopped.sort();
  out.stale.sort();
  out.unchecked.sort();
  return out;
}
