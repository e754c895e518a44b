import { assertEquals } from "../../tests/assert.ts";
import { RealTime } from "./rt.ts";
import { SCHED } from "../sys/libc.ts";

/** A RealTime on a clock and CPU counter the test moves, recording each policy switch. */
function fake(refuse = false) {
  const t = { wall: 0, cpu: 0, calls: [] as [number, number][] };
  const rt = new RealTime(3, {
    now: () => t.wall,
    cpu: () => t.cpu,
    set: (policy, priority) => {
      t.calls.push([policy, priority]);
      return refuse ? -1 : 0;
    },
  });
  /** `ms` of wall time pass, the thread running `share` of it; then it wakes (or, `burst`, serves on). */
  const run = (ms: number, share: number, burst = false) => {
    t.wall += ms;
    t.cpu += ms * share * 1e6;
    rt.tick(burst);
  };
  return { t, rt, run };
}

Deno.test("RealTime: over half a CPU across a window drops to the ordinary policy; under a quarter goes back to SCHED_RR at its priority", () => {
  const { t, rt, run } = fake();
  run(50, 1); // within the first window: nothing is decided yet
  assertEquals(t.calls, []);
  run(60, 0.9); // 110 ms, 0.9 of it running: 0.86 of a CPU
  assertEquals(t.calls, [[SCHED.OTHER, 0]]);
  assertEquals([rt.rr, rt.drops], [false, 1]);
  run(100, 0.4); // between the two bounds: stays
  assertEquals(t.calls.length, 1);
  run(5_000, 0.001); // quiet, then a wake: the idle time counts, back to SCHED_RR
  assertEquals(t.calls, [[SCHED.OTHER, 0], [SCHED.RR, 3]]);
  assertEquals(rt.rr, true);
  run(100, 0.4); // at SCHED_RR a share under one half stays there
  assertEquals(t.calls.length, 2);
});

Deno.test("RealTime: a refused switch changes nothing it reports", () => {
  const { rt, run } = fake(true);
  run(200, 1);
  run(20, 1, true);
  assertEquals([rt.rr, rt.drops], [true, 0]);
});

Deno.test("RealTime: one burst 10 ms long without an idle wait drops to the ordinary policy at once; a share under a quarter brings it back", () => {
  const { t, rt, run } = fake();
  run(1, 0.1); // a wake
  run(5, 1, true); // 5 ms into the burst: on
  assertEquals(t.calls, []);
  run(5, 1, true); // 10 ms
  assertEquals(t.calls, [[SCHED.OTHER, 0]]);
  assertEquals([rt.rr, rt.drops], [false, 1]);
  run(1_000, 0.001); // then quiet: the next wake's window is under a quarter
  assertEquals(t.calls, [[SCHED.OTHER, 0], [SCHED.RR, 3]]);
  run(5, 1, true); // a burst counts from its own wake
  assertEquals(t.calls.length, 2);
});
