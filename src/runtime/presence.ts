/** The agent summary projections `agent/<n>.d/status`, `pid` and `log`: ready/busy while served, idle or dead after; the agent's stderr, bounded (the whole log rotated under the run dir). */
import type { ChildProcess } from "node:child_process";
import { controlMode } from "../abi/controls.ts";
import { replaceFile } from "../store/atomic.ts";
import { readRegularText } from "../store/regular.ts";
import { appendRotated, ROTATE_BYTES } from "./log.ts";
import { ignore } from "../abi/errno.ts";

/** `log` keeps its newest lines within this many bytes (the control bound is 64 KiB). */
export const LOG_BYTES = 48 * 1024;

/**
 * What `agent/<n>.d/status` says (spec/runtime.md "States"): `start` (an instance is spawned and
 * held), `ready`/`busy` (it serves; a run is live), `stopping` (asked to stop), `idle` (no
 * instance, the socket is armed: the next connection starts one), `dead` (not served, or the last
 * instance failed; its socket, when armed, still starts a new one).
 */
export type AgentStatus = "start" | "ready" | "busy" | "idle" | "stopping" | "dead";

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

/** What a projection file holds now (undefined when absent or not a regular file: it is then written). */
function current(path: string): string | undefined {
  try {
    return readRegularText(path); // never waits on a FIFO planted there
  } catch (e) {
    ignore(e, "EIO", "ELOOP");
    return undefined;
  }
}

/** Tracks which agents are served and how many runs each has live; keeps status/pid in step. */
export class Presence {
  readonly #root: string;
  readonly #served = new Set<string>();
  readonly #runs = new Map<string, number>();
  readonly #sink?: (name: string, lines: string) => void;
  readonly #changed?: () => void;
  readonly #logDir?: string;
  readonly #logBytes: number;
  readonly #report?: (status: AgentStatus) => Promise<void>;

  /**
   * `options.log` takes the agent's log lines instead of the file (an instance hands them to its
   * host on stderr: the log keeps one writer); `options.changed` hears every run start and end.
   * `options.logDir` (the host's `<run>/log`) also keeps each agent's whole log there,
   * `<name>.log` rotated to `<name>.log.1` at `options.logBytes` (default {@link ROTATE_BYTES}).
   * `options.report` (an instance) writes nothing: each status goes to the host, which writes
   * `status` and `pid` and acknowledges; the returned promises resolve on that acknowledgement.
   */
  constructor(
    root: string,
    options: {
      log?: (name: string, lines: string) => void;
      changed?: () => void;
      logDir?: string;
      logBytes?: number;
      report?: (status: AgentStatus) => Promise<void>;
    } = {},
  ) {
    this.#report = options.report;
    this.#root = root;
    this.#sink = options.log;
    this.#changed = options.changed;
    this.#logDir = options.logDir;
    this.#logBytes = options.logBytes ?? ROTATE_BYTES;
  }

  /**
   * Writes `status` and `pid` (empty for null) of an agent (the host's own projection). `pid` is
   * replaced only when it says something else: every run reports busy, then ready, with the
   * same pid, and a replace costs a create and a rename on the tree each time.
   */
  set(name: string, status: AgentStatus, pid: number | null): void {
    const dir = `${this.#root}/agent/${name}.d`;
    // pid first: a reader that sees the new status (what callers wait on) sees its pid too.
    const text = pid === null ? "" : `${pid}\n`;
    if (current(`${dir}/pid`) !== text) project(`${dir}/pid`, text);
    project(`${dir}/status`, `${status}\n`);
  }

  /** This process's status for `name`: reported to the host, or written here. */
  #write(name: string, status: AgentStatus): Promise<void> {
    if (this.#report) return this.#report(status);
    this.set(name, status, status === "dead" || status === "idle" ? null : Deno.pid);
    return Promise.resolve();
  }

  /** The agent is served now: `ready` (or `busy` when runs are live) and this process's pid. */
  serve(name: string): Promise<void> {
    this.#served.add(name);
    return this.#write(name, this.#runs.get(name) ? "busy" : "ready");
  }

  /**
   * The agent is no longer served by this process: `final` (`dead` by default: nothing serves it;
   * an instance says `idle`: its host still holds the socket), pid empty.
   */
  unserve(name: string, final: "idle" | "dead" = "dead"): Promise<void> {
    this.#served.delete(name);
    return this.#write(name, final);
  }

  /** Live runs of every agent together. */
  live(): number {
    let n = 0;
    for (const v of this.#runs.values()) n += v;
    return n;
  }

  /** A run of `name` starts (the first live one makes it `busy`); resolves once that is written. */
  begin(name: string): Promise<void> {
    const n = (this.#runs.get(name) ?? 0) + 1;
    this.#runs.set(name, n);
    const p = n === 1 && this.#served.has(name) ? this.#write(name, "busy") : Promise.resolve();
    this.#changed?.();
    return p;
  }

  /** A run of `name` ended (the last one makes it `ready` again); resolves once that is written. */
  end(name: string): Promise<void> {
    const n = (this.#runs.get(name) ?? 1) - 1;
    if (n > 0) this.#runs.set(name, n);
    else this.#runs.delete(name);
    const p = n <= 0 && this.#served.has(name) ? this.#write(name, "ready") : Promise.resolve();
    this.#changed?.();
    return p;
  }

  /**
   * Appends `lines` (already LF-terminated) to `agent/<name>.d/log`, keeping the newest whole
   * lines within {@link LOG_BYTES}: a bounded summary (the oldest lines dropped). The file is a
   * secret control (0600: what an agent prints may hold anything), replaced atomically. With a
   * `logDir`, the lines are first appended to the whole, rotated log there.
   */
  log(name: string, lines: string): void {
    if (lines === "") return;
    if (this.#sink) return this.#sink(name, lines);
    if (this.#logDir) {
      appendRotated(`${this.#logDir}/${name}.log`, lines, { limit: this.#logBytes });
    }
    const path = `${this.#root}/agent/${name}.d/log`;
    let old = "";
    try {
      old = Deno.readTextFileSync(path);
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* none yet */
    }
    let text = old + lines;
    const enc = new TextEncoder();
    while (enc.encode(text).length > LOG_BYTES) {
      const cut = text.indexOf("\n", Math.max(0, text.length - LOG_BYTES));
      text = cut < 0 ? "" : text.slice(cut + 1);
    }
    project(path, text);
  }
}

/** Line-buffers an instance's stderr into the agent's log (whole lines only; the rest at exit). */
export function logPump(presence: Presence, name: string, child: ChildProcess): () => void {
  let part = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    part += chunk;
    const cut = part.lastIndexOf("\n");
    if (cut < 0) return;
    presence.log(name, part.slice(0, cut + 1));
    part = part.slice(cut + 1);
  });
  return () => {
    if (part !== "") presence.log(name, part + "\n");
    part = "";
  };
}
