/** The agent summary projections `agent/<n>.d/status`, `pid` and `log`: ready/busy while served, dead after; the agent's stderr, bounded. */
import { controlMode } from "../abi/controls.ts";
import { replaceFile } from "../store/atomic.ts";

/** `log` keeps its newest lines within this many bytes (the control bound is 64 KiB). */
export const LOG_BYTES = 48 * 1024;

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
      mode: controlMode("agent", path.slice(path.lastIndexOf("/") + 1)),
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

  /**
   * Appends `lines` (already LF-terminated) to `agent/<name>.d/log`, keeping the newest whole
   * lines within {@link LOG_BYTES}: bounded, rotated by dropping the oldest. The file is a secret
   * control (0600: what an agent prints may hold anything), replaced atomically.
   */
  log(name: string, lines: string): void {
    if (lines === "") return;
    const path = `${this.#root}/agent/${name}.d/log`;
    let old = "";
    try {
      old = Deno.readTextFileSync(path);
    } catch { /* none yet */ }
    let text = old + lines;
    const enc = new TextEncoder();
    while (enc.encode(text).length > LOG_BYTES) {
      const cut = text.indexOf("\n", Math.max(0, text.length - LOG_BYTES));
      text = cut < 0 ? "" : text.slice(cut + 1);
    }
    project(path, text);
  }
}
