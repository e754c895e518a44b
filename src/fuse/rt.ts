/**
 * The serving thread's scheduling: SCHED_RR while it uses little of a CPU, so a request on a busy
 * machine waits for no agent's process; the ordinary policy while it uses much, so a client that
 * floods the mount gets no real-time share of the machine, and a sequential client on the same
 * CPU may preempt it at each reply (spec/fuse.md "Running").
 */
import * as libc from "../sys/libc.ts";
import { ignore } from "../abi/errno.ts";

/** How often the thread's CPU share is looked at (ms of wall time, checked when it runs). */
const WINDOW_MS = 100;
/** The longest the thread serves one burst (no idle wait in between) at SCHED_RR (ms). */
const RUN_MS = 10;

/** Options for {@link RealTime}. */
export interface RealTimeOptions {
  /** Share of one CPU above which the thread drops to the ordinary policy (default 0.5). */
  over?: number;
  /** Share below which it goes back to SCHED_RR (default 0.25). */
  under?: number;
  /** The thread's CPU time so far, ns (default: its /proc/thread-self/schedstat). */
  cpu?: () => number;
  /** Switches the calling thread's policy: 0 or -errno (default libc.setSched). */
  set?: (policy: number, priority: number) => number;
  /** Wall clock, ms (default performance.now). */
  now?: () => number;
}

/** Decides the serving thread's policy from its CPU share; every call is on that thread. */
export class RealTime {
  readonly #priority: number;
  readonly #over: number;
  readonly #under: number;
  readonly #cpu: () => number;
  readonly #set: (policy: number, priority: number) => number;
  readonly #now: () => number;
  #start: number;
  #ran: number;
  /** When the thread last woke from an idle wait. */
  #woke: number;
  /** At SCHED_RR now (false: dropped to the ordinary policy for using too much). */
  rr = true;
  /** Times it dropped to the ordinary policy (status, tests). */
  drops = 0;

  /** For a thread already at SCHED_RR `priority`. */
  constructor(priority: number, options: RealTimeOptions = {}) {
    this.#priority = priority;
    this.#over = options.over ?? 0.5;
    this.#under = options.under ?? 0.25;
    this.#cpu = options.cpu ?? threadCpu;
    this.#set = options.set ?? libc.setSched;
    this.#now = options.now ?? (() => performance.now());
    this.#start = this.#woke = this.#now();
    this.#ran = this.#cpu();
  }

  /**
   * Called when the thread wakes for a request (`burst` false) and every 128 requests of a burst
   * (true). A burst that has run {@link RUN_MS} without an idle wait drops to the ordinary
   * policy at once: no caller keeps a CPU's ordinary tasks waiting longer than that. Otherwise,
   * once a window has passed, the thread's share of a CPU over it decides. Idle, it is never
   * called, and the first wake after measures the idle time too (back to SCHED_RR).
   */
  tick(burst: boolean): void {
    const now = this.#now();
    if (!burst) this.#woke = now;
    else if (this.rr && now - this.#woke >= RUN_MS) this.#drop();
    const wall = now - this.#start;
    if (wall < WINDOW_MS) return;
    const ran = this.#cpu();
    const share = (ran - this.#ran) / (wall * 1e6);
    this.#start = now;
    this.#ran = ran;
    if (this.rr && share > this.#over) this.#drop();
    else if (!this.rr && share < this.#under) {
      if (this.#set(libc.SCHED.RR, this.#priority) === 0) this.rr = true;
    }
  }

  #drop(): void {
    if (this.#set(libc.SCHED.OTHER, 0) !== 0) return;
    this.rr = false;
    this.drops++;
  }
}

/** The calling thread's CPU time in ns: the first field of /proc/thread-self/schedstat. */
function threadCpu(): number {
  try {
    const s = Deno.readTextFileSync("/proc/thread-self/schedstat");
    return Number(s.slice(0, s.indexOf(" ")));
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return 0; // no procfs: the share reads 0 and the policy stays
  }
}
