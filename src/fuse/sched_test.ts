/** AdaptiveSched: every wait at SCHED_RR, but a client's burst served at the ordinary policy, unless the CPUs are busy. */
import { assertEquals } from "../../tests/assert.ts";
import { AdaptiveSched, BURST, BUSY_MS, CHECK, HOLD_MS, QUICK_MS, type RunQueue } from "./sched.ts";

/** A sched whose switches are recorded (true: to SCHED_RR), with a run queue and a clock set by hand. */
function recorded() {
  const calls: boolean[] = [];
  const rq: RunQueue = { waitNs: 0, slices: 0 };
  const clock = { ms: 0 };
  const s = new AdaptiveSched((rt) => calls.push(rt), () => ({ ...rq }), () => clock.ms);
  return { calls, rq, clock, s };
}

const quick = QUICK_MS / 2;

/** `n` waits that each end with a request after `ms`, as the loop makes them. */
function waits(s: AdaptiveSched, n: number, ms: number): void {
  for (let i = 0; i < n; i++) {
    if (s.waiting() > 0 && ms >= QUICK_MS) s.realtime();
    s.woke(ms);
  }
}

Deno.test("after a burst of quick waits the thread waits first at the ordinary policy, then at SCHED_RR", () => {
  const { calls, s } = recorded();
  waits(s, BURST, quick);
  assertEquals(
    calls,
    [],
    "no switch during the burst's first waits: the thread started at SCHED_RR",
  );
  assertEquals(s.waiting(), QUICK_MS, "a short first wait");
  assertEquals(calls, [false], "at the ordinary policy, only now that it waits");
  s.woke(quick);
  waits(s, 10, quick);
  assertEquals(calls, [false], "the burst goes on without a switch");
  // No request within QUICK_MS: the rest of the wait is at SCHED_RR, and the burst is over.
  assertEquals(s.waiting(), QUICK_MS);
  s.realtime();
  s.woke(5);
  assertEquals(calls, [false, true]);
  assertEquals(s.waiting(), 0);
  assertEquals(s.rt, true);
});

Deno.test("a slow wait or a wait that ended without a request ends a burst before it began", () => {
  for (const end of ["slow", "idle"] as const) {
    const { calls, s } = recorded();
    waits(s, BURST - 1, quick);
    s.waiting();
    if (end === "slow") s.woke(QUICK_MS);
    else s.idle();
    waits(s, BURST - 1, quick);
    assertEquals(s.waiting(), 0, end);
    assertEquals(calls, [], end);
  }
});

Deno.test("a stat's few quick requests between slow ones keep the thread at SCHED_RR", () => {
  const { calls, s } = recorded();
  for (let stat = 0; stat < 100; stat++) {
    waits(s, 1, 5); // the next stat, a few ms later
    waits(s, 3, quick);
  }
  assertEquals(calls, []);
  assertEquals(s.rt, true);
});

Deno.test("a run-queue wait at the ordinary policy above BUSY_MS per slice puts the thread back at SCHED_RR for HOLD_MS", () => {
  const { calls, rq, clock, s } = recorded();
  waits(s, BURST, quick);
  s.waiting();
  assertEquals(calls, [false]);
  // A sequential client on the same CPU: short waits for it, served at the ordinary policy.
  for (let i = 0; i < CHECK * 4; i++) {
    rq.slices++;
    rq.waitNs += 5_000;
    s.served();
  }
  assertEquals(calls, [false]);
  // The CPUs got busy: slices wait longer than BUSY_MS on average.
  for (let i = 0; i < CHECK; i++) {
    rq.slices++;
    rq.waitNs += BUSY_MS * 2e6;
    s.served();
  }
  assertEquals(calls, [false, true]);
  // Held at SCHED_RR, bursts or not, until HOLD_MS passed.
  waits(s, BURST * 2, quick);
  assertEquals(s.waiting(), 0);
  clock.ms += HOLD_MS;
  waits(s, BURST, quick);
  assertEquals(s.waiting(), QUICK_MS);
  assertEquals(calls, [false, true, false]);
});
