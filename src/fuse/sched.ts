/**
 * The mount's serving thread between SCHED_RR and the ordinary policy (spec/fuse.md "Running",
 * `--mount-policy adaptive`, the default). It waits for requests at SCHED_RR, so on a machine the
 * agents keep busy a request's wake-up preempts them. But at SCHED_RR a sequential client cannot
 * preempt the thread when its reply wakes it: the thread runs on into its next wait, and each
 * request costs a poll, a sleep and a wake-up (about 40% of such a client's throughput). So once
 * requests come back to back (a burst: {@link BURST} quick waits in a row), the thread serves and
 * first waits at the ordinary policy: the client then preempts it at each reply, and its next
 * request is read without a sleep. It goes back to SCHED_RR when the burst ends (no request for
 * {@link QUICK_MS}; it waits on at SCHED_RR), and when its run-queue wait at the ordinary policy
 * says the CPUs are busy (it then stays at SCHED_RR for {@link HOLD_MS}, bursts or not).
 */

/** Quick waits in a row that make a burst. */
export const BURST = 16;
/** A wait for the next request shorter than this (ms) is quick: a client sending back to back. */
export const QUICK_MS = 0.2;
/** Requests served at the ordinary policy between two looks at the run-queue wait. */
export const CHECK = 16;
/** A mean run-queue wait per time slice (ms) above this at the ordinary policy: the CPUs are busy. */
export const BUSY_MS = 0.2;
/** How long the thread then stays at SCHED_RR (ms). */
export const HOLD_MS = 100;

/** The calling thread's run-queue wait so far and its time slices (`/proc/thread-self/schedstat`). */
export interface RunQueue {
  waitNs: number;
  slices: number;
}

/**
 * The policy switches, driven by the serving loop; `set(true)` puts the thread at SCHED_RR (its
 * priority), `set(false)` at the ordinary policy. The thread starts at SCHED_RR. Every switch is
 * made just before a wait, or where the thread goes to SCHED_RR: never to the ordinary policy
 * while it holds a request (the switch would hand the CPU to whatever else is runnable).
 */
export class AdaptiveSched {
  #set: (rt: boolean) => void;
  #runQueue: () => RunQueue | null;
  #now: () => number;
  #rt = true;
  #quick = 0;
  #served = 0;
  #at: RunQueue | null = null;
  #hold = -Infinity;

  constructor(
    set: (rt: boolean) => void,
    runQueue: () => RunQueue | null,
    now: () => number = () => performance.now(),
  ) {
    this.#set = set;
    this.#runQueue = runQueue;
    this.#now = now;
  }

  /** True while the thread is at SCHED_RR. */
  get rt(): boolean {
    return this.#rt;
  }

  /**
   * The device is empty and the thread is about to wait. In a burst: the ms to wait first at the
   * ordinary policy (the thread is put there); else 0, and the thread is at SCHED_RR.
   */
  waiting(): number {
    if (this.#quick >= BURST && this.#now() >= this.#hold) {
      if (this.#rt) {
        this.#rt = false;
        this.#set(false);
        this.#served = 0;
        this.#at = this.#runQueue();
      }
      return QUICK_MS;
    }
    this.realtime();
    return 0;
  }

  /** The rest of the wait is at SCHED_RR (a burst's first part ended without a request). */
  realtime(): void {
    if (this.#rt) return;
    this.#rt = true;
    this.#set(true);
  }

  /** The wait ended with a request after `ms`. */
  woke(ms: number): void {
    if (ms >= QUICK_MS) this.#quick = 0;
    else if (this.#quick < BURST) this.#quick++;
  }

  /** The wait ended without a request (the loop hands over to its event loop): no burst. */
  idle(): void {
    this.#quick = 0;
  }

  /** A request was read; at the ordinary policy, now and then: is the CPU still got at once? */
  served(): void {
    if (this.#rt || ++this.#served < CHECK) return;
    this.#served = 0;
    const at = this.#runQueue();
    const was = this.#at;
    this.#at = at;
    if (!at || !was || at.slices <= was.slices) return;
    if ((at.waitNs - was.waitNs) / (at.slices - was.slices) / 1e6 <= BUSY_MS) return;
    this.#hold = this.#now() + HOLD_MS;
    this.#quick = 0;
    this.realtime();
  }
}
