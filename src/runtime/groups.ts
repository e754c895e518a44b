/** Receipts of live agent process groups under the run dir; at start the runtime stops the groups a killed daemon left. */
import { ignore, toCtxError } from "../abi/errno.ts";
import {
  bootId,
  pinProcess,
  procUid,
  type Seen,
  seen,
  startTimeAsync,
} from "../sandbox/receipt.ts";
import { asSender } from "../sys/fsid.ts";
import { ensureDir, tempPath } from "../store/atomic.ts";
import { readRegularText } from "../store/regular.ts";
import { closeFd } from "../sys/sock.ts";
import { waitExits } from "../sys/wait.ts";
import { GRACE_MS } from "./proc.ts";

/** Schema tag of a group receipt file. */
export const GROUP_SCHEMA = "cortexfs.agent-group/v1";

/** One live agent process group, as recorded right after its spawn. */
export interface GroupReceipt {
  schema: typeof GROUP_SCHEMA;
  /** The group leader (`setsid` execs the agent in place, so pid == pgid). */
  pid: number;
  pgid: number;
  /** Field 22 of `/proc/<pid>/stat`: tells this process from a later one with the same pid. */
  start: string;
  /** `/proc/sys/kernel/random/boot_id`: a receipt of an earlier boot proves nothing. */
  boot: string;
  /** What the group was doing (diagnostics only; never used to decide). */
  run: string;
  agent: string;
  step: number;
}

/** What {@link reapGroups} did with each receipt it found. */
export interface Reaped {
  /** Process groups that still matched their receipt and were stopped. */
  stopped: number[];
  /** Receipts dropped without a signal: process gone, pid reused, other boot, or unreadable. */
  stale: string[];
  /**
   * Receipts kept without a signal: /proc could not be read to check them (EMFILE), so nothing
   * is proven either way; the next reap looks again.
   */
  unchecked: string[];
}

let boot: string | undefined;

/** The boot id, read once (it cannot change while this process lives). */
function thisBoot(): string {
  return boot ??= bootId();
}

/** The receipts directory of a runtime: `<run>/groups`. */
export function groupsDir(run: string): string {
  return `${run}/groups`;
}

/**
 * Records a freshly spawned group atomically (temp + rename) as `<dir>/<pgid>.json`, before the
 * agent gets its envelope. Returns the receipt path for {@link dropGroup}, or undefined when the
 * leader is already gone (and reaped): there is then no process to prove anything about.
 */
export async function recordGroup(
  dir: string,
  pid: number,
  facts: { run: string; agent: string; step: number },
): Promise<string | undefined> {
  let start: string;
  try {
    start = await startTimeAsync(pid);
  } catch (e) {
    ignore(e, "ESRCH");
    return undefined;
  }
  const receipt: GroupReceipt = {
    schema: GROUP_SCHEMA,
    pid,
    pgid: pid,
    start,
    boot: thisBoot(),
    ...facts,
  };
  const path = `${dir}/${pid}.json`;
  // Atomic (temp + rename) but not fsynced: a receipt only means something on this boot (its boot
  // id says so), and a killed daemon's writes are in the page cache all the same; an fsync here
  // would cost every step a journal commit for nothing.
  const tmp = tempPath(path);
  try {
    Deno.writeTextFileSync(tmp, JSON.stringify(receipt) + "\n", { mode: 0o600, createNew: true });
    Deno.renameSync(tmp, path);
  } catch (e) {
    dropGroup(tmp);
    throw toCtxError(e, path);
  }
  return path;
}

/** Removes a receipt once its group is gone (missing is fine: nothing to forget). */
export function dropGroup(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* already gone */
  }
}

function parse(text: string): GroupReceipt | undefined {
  try {
    const r = JSON.parse(text);
    const ok = r?.schema === GROUP_SCHEMA && Number.isInteger(r.pid) && r.pid > 1 &&
      r.pgid === r.pid && typeof r.start === "string" && /^\d+$/.test(r.start) &&
      typeof r.boot === "string";
    return ok ? r : undefined;
  } catch {
    return undefined;
  }
}

/** What a check of the receipt's leader finds (live: same start time on this boot, not a zombie). */
function check(r: GroupReceipt): Seen {
  return seen(r.pid, r.start, r.boot);
}

/** A pidfd on the receipt's leader, opened before the receipt is checked ({@link pinProcess}). */
function pin(r: GroupReceipt): number | "stale" {
  return pinProcess(r.pid, () => check(r));
}

/** Sent as the leader's uid (asSender): an instance holds no CAP_KILL. */
function signalGroup(pgid: number, sig: Deno.Signal, uid: number): void {
  try {
    asSender(uid, () => Deno.kill(-pgid, sig));
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* ESRCH: the group is gone */
  }
}

/** The uid of a matched leader; 0 when it is gone meanwhile (a signal then finds no group anyway). */
function leaderUid(r: GroupReceipt): number {
  try {
    return procUid(r.pid);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return 0;
  }
}

/** A receipt that matched its leader, and a pidfd pinned on that leader (negative: none to be had). */
interface Live {
  r: GroupReceipt;
  path: string;
  fd: number;
  /** The leader's real uid, read while it matched (its group's, after the step's setpriv). */
  uid: number;
}

/**
 * Waits for every leader's exit, up to `graceMs`: the pgids of those still running then, sorted
 * (none: each exit was seen). The leaders are a killed daemon's, no children of ours, so waitid
 * cannot see them: each exit is its pidfd turning readable, all of them in one poll off the JS
 * thread ({@link waitExits}) whose timeout is the grace left. A leader without a pidfd (EMFILE)
 * is waited for by the grace alone.
 */
async function leadersExit(live: readonly Live[], graceMs: number): Promise<number[]> {
  if (live.length === 0) return [];
  const end = performance.now() + graceMs;
  const left = new Set(await waitExits(live.filter((l) => l.fd >= 0).map((l) => l.fd), graceMs));
  if (live.some((l) => l.fd < 0)) {
    await new Promise((res) => setTimeout(res, Math.max(0, end - performance.now())));
  }
  // without a pidfd, a leader not seen gone is counted as still running
  return live.filter((l) => l.fd < 0 ? check(l.r) !== "gone" : left.has(l.fd)).map((l) => l.r.pgid)
    .sort((a, b) => a - b);
}

/** Options of {@link reapGroups}. */
export interface ReapOptions {
  /** Between SIGTERM and SIGKILL (default {@link GRACE_MS}). */
  graceMs?: number;
  /** Only this agent's receipts (an instance reaping its own). */
  agent?: string;
  /**
   * Told how the wait after SIGTERM ended, when there was one: the pgids whose leader was still
   * running at the grace's end (none: every leader's exit ended it).
   */
  onGrace?: (late: number[]) => void;
}

/**
 * Stops every group whose receipt in `dir` still matches a live leader (same boot, same start
 * time): SIGTERM to the group, SIGKILL once every leader has exited or the grace is over. A receipt
 * whose pid is gone or now names another process (different start time or boot) kills nothing:
 * its leader is pinned by a pidfd opened before the receipt is checked ({@link pinProcess}), so a
 * pid reused after the check cannot stand in for it in the wait. Every receipt is removed; with
 * `agent`, only that agent's receipts are looked at (an instance reaping its own).
 */
export async function reapGroups(dir: string, options: ReapOptions = {}): Promise<Reaped> {
  ensureDir(dir, 0o700);
  const out: Reaped = { stopped: [], stale: [], unchecked: [] };
  const live: Live[] = [];
  try {
    for (const e of Deno.readDirSync(dir)) {
      if (!e.isFile || !e.name.endsWith(".json")) continue;
      const path = `${dir}/${e.name}`;
      let r: GroupReceipt | undefined;
      try {
        // Root's own directory, but a wait on a FIFO would stall every start: regular files only,
        // and anything else there (EIO) is a stale receipt like an unparsable one.
        r = parse(readRegularText(path) ?? "");
      } catch (err) {
        if (toCtxError(err, path).errno !== "EIO") throw toCtxError(err, path);
      }
      // An instance reaps only its own agent's groups; another agent's receipts are not its to judge.
      if (options.agent !== undefined && r?.agent !== options.agent) continue;
      const fd = r ? pin(r) : "stale";
      // No verified pidfd (EMFILE, or /proc unreadable): signalled only if seen live now.
      const now = r && fd !== "stale" && fd < 0 ? check(r) : null;
      if (r && now === "unknown") out.unchecked.push(e.name);
      else if (r && fd !== "stale" && now !== "gone") live.push({ r, path, fd, uid: leaderUid(r) });
      else {
        out.stale.push(e.name);
        dropGroup(path);
      }
    }
    for (const { r, uid } of live) signalGroup(r.pgid, "SIGTERM", uid);
    const late = await leadersExit(live, options.graceMs ?? GRACE_MS);
    if (live.length > 0) options.onGrace?.(late);
  } finally {
    for (const { fd } of live) if (fd >= 0) closeFd(fd); // no poll on them is left
  }
  for (const { r, path, uid } of live) {
    // Members that outlived the leader (or ignored SIGTERM) get SIGKILL either way. The leader
    // matched its receipt a grace period ago, and Linux hands out pids cyclically, so the group
    // id cannot name a new group yet (as in stopGroup).
    signalGroup(r.pgid, "SIGKILL", uid);
    out.stopped.push(r.pgid);
    dropGroup(path);
  }
  out.stopped.sort((a, b) => a - b);
  out.stale.sort();
  out.unchecked.sort();
  return out;
}
