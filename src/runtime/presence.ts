/** The agent summary projections `agent/<n>.d/status` and `pid`: ready/busy while served, dead after. */
import { replaceFile } from "../store/atomic.ts";

/** What `agent/<n>.d/status` says (the subset of the ABI's values this runtime writes). */
export type AgentStatus = "ready" | "busy" | "dead";

/**
 * Writes `text` to `path` atomically (temp + rename) as a definition file: the daemon's (root's),
 * 0644, mode and owner set through the descriptor (src/store/atomic.ts), never by path. Not
 * fsynced: status and pid are dynamic summaries (spec: not durable state), and the next start
 * rewrites them; an fsync here would cost every run two journal commits for nothing.
 */
function project(path: string, text: string): void {
  try {
    replaceFile(path, text, {
      mode: 0o644,
      uid: Deno.uid() ?? 0,
      gid: Deno.gid() ?? 0,
      sync: false,
    });
  } catch {
    // A summary must never fail a run or a start (the agent may have just been removed).
  }
}

/** Tracks which agents are served and how many runs each has live; keeps status/pid in step. */
export class Presence {
  readonly #root: string;
  readonly #served = new Set<string>();
  readonly #runs = new Map<string, number>();

  constructor(root: string) {
    this.#root = root;
  }

  #write(name: string, status: AgentStatus): void {
    const dir = `${this.#root}/agent/${name}.d`;
    project(`${dir}/status`, `${status}\n`);
    project(`${dir}/pid`, status === "dead" ? "" : `${Deno.pid}\n`);
  }

  /** The agent is served now: `ready` (or `busy` when runs are live) and the daemon pid. */
  serve(name: string): void {
    this.#served.add(name);
    this.#write(name, this.#runs.get(name) ? "busy" : "ready");
  }

  /** The agent is no longer served: `dead`, pid empty. */
  unserve(name: string): void {
    this.#served.delete(name);
    this.#write(name, "dead");
  }

  /** A run of `name` starts (the first live one makes it `busy`). */
  begin(name: string): void {
    const n = (this.#runs.get(name) ?? 0) + 1;
    this.#runs.set(name, n);
    if (n === 1 && this.#served.has(name)) this.#write(name, "busy");
  }

  /** A run of `name` ended (the last one makes it `ready` again). */
  end(name: string): void {
    const n = (this.#runs.get(name) ?? 1) - 1;
    if (n > 0) this.#runs.set(name, n);
    else this.#runs.delete(name);
    if (n <= 0 && this.#served.has(name)) this.#write(name, "ready");
  }
}
