import { ignore } from "../abi/errno.ts";
/** The dynamic `/ctx/status` file: generation, tree version, agents and their state, uptime. */

/** Facts the daemon knows about itself. */
export interface StatusInfo {
  /** Storage root and the generation name being served. */
  storage: string;
  generation: string;
  /** Mount point. */
  mount: string;
  /** Daemon start, unix milliseconds. */
  started: number;
  /** Daemon pid. */
  pid: number;
  /** The serving thread's scheduling now (absent: served in-thread, nothing to tell). */
  serving?: () => Serving;
}

/** The serving thread's scheduling, as `status` shows it. */
export interface Serving {
  /** `SCHED_RR` or `ordinary` now. */
  policy: "SCHED_RR" | "ordinary";
  /** Its SCHED_RR priority (0: always ordinary, by --mount-priority 0 or a refusal). */
  priority: number;
  /** Times it dropped to the ordinary policy for using over half a CPU, or one long burst (rt.ts). */
  drops: number;
}

function read(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return null;
  }
}

/**
 * The status text: one JSON object and a newline (`cortexfs.status/v1`). Agents are the
 * definitions under `agent/` with the state from their `.d/status` projection (`dead` when absent).
 */
export function statusText(root: string, info: StatusInfo): string {
  let treeVersion: number | null = null;
  try {
    const b = JSON.parse(read(`${root}/bin/cortexfs.bootstrap.json`) ?? "null");
    if (typeof b?.tree_version === "number") treeVersion = b.tree_version;
  } catch { /* a broken bootstrap file shows as null */ }
  const agents: { name: string; state: string; pid: number | null }[] = [];
  try {
    for (const e of Deno.readDirSync(`${root}/agent`)) {
      if (!e.isFile || e.name.startsWith(".") || e.name.endsWith(".sock")) continue;
      const state = (read(`${root}/agent/${e.name}.d/status`) ?? "").trim() || "dead";
      const pid = Number((read(`${root}/agent/${e.name}.d/pid`) ?? "").trim()) || null;
      agents.push({ name: e.name, state, pid });
    }
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* no agent dir: no agents */
  }
  agents.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  return JSON.stringify({
    schema: "cortexfs.status/v1",
    state: "online",
    generation: Number(info.generation) || info.generation,
    tree_version: treeVersion,
    storage: info.storage,
    mount: info.mount,
    pid: info.pid,
    uptime_s: Math.floor((Date.now() - info.started) / 1000),
    ...(info.serving ? { serving: info.serving() } : {}),
    agents,
  }) + "\n";
}
