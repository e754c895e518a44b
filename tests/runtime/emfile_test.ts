/**
 * Receipt checks in a process out of file descriptors (EMFILE): /proc cannot be read, and that
 * proves nothing. Such a check is `unknown`, never `gone`: no signal is sent on it and the stop is
 * reported unchecked, not stale; with the fds back, the same receipts stop the process.
 */
import { assert, assertEquals } from "../assert.ts";
import { gone, pgidOf } from "../fixture/proc.ts";
import { until } from "../fixture/wait.ts";
import { bootId, type Receipt, startTime } from "../../src/sandbox/receipt.ts";
import { receiptOf, writeReceipt } from "../../src/host/receipt.ts";

// Run in a child with at most 256 fds: every one is taken, the checks run, the fds are given back
// and the stop runs again.
const script = (launch: string, receipt: string) => `
const { receiptSeen, pinProcess } = await import("${
  import.meta.resolve("../../src/sandbox/receipt.ts")
}");
const { reapInit } = await import("${import.meta.resolve("../../src/sandbox/launch.ts")}");
const { stopVerified } = await import("${import.meta.resolve("../../src/host/receipt.ts")}");
const launch = ${launch};
const receipt = ${receipt};
receiptSeen(launch); // the boot id read once, as a long-running process has
const held = [];
let errno = "";
try {
  for (;;) held.push(Deno.openSync("/dev/null"));
} catch (e) {
  errno = e.code;
}
const out = {
  errno,
  seen: receiptSeen(launch),
  pin: pinProcess(launch.pid, () => receiptSeen(launch)),
  reap: await reapInit(launch, { exitMs: 0, killMs: 0 }),
  stop: await stopVerified(receipt, { graceMs: 0 }),
};
for (const f of held) f.close();
out.after = { seen: receiptSeen(launch), stop: await stopVerified(receipt, { graceMs: 60_000 }) };
console.log(JSON.stringify(out));
`;

Deno.test("out of fds, a receipt check is unknown: reapInit and stopVerified signal nothing and say so; with fds back the receipt stops it", async () => {
  // A sleep in a group of its own, as an instance and a sandbox init are.
  const child = new Deno.Command("setsid", {
    args: ["sleep", "120"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const dir = await Deno.makeTempDir();
  try {
    await until(() => pgidOf(child.pid) === child.pid, "setsid to make the sleep's group");
    const launch: Receipt = {
      pid: child.pid,
      start: startTime(child.pid),
      launcher: child.pid,
      boot: bootId(),
    };
    const receipt = receiptOf("t", child.pid, { uid: 0 });
    assert(receipt, "the sleep's receipt");
    const path = `${dir}/check.ts`;
    Deno.writeTextFileSync(path, script(JSON.stringify(launch), JSON.stringify(receipt)));
    const o = await new Deno.Command("prlimit", {
      args: ["--nofile=256:256", Deno.execPath(), "run", "-A", path],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(o.stderr);
    assert(o.success, `the check process failed: ${err}`);
    const out = JSON.parse(new TextDecoder().decode(o.stdout));
    assertEquals(out.errno, "EMFILE", "every fd of the check process taken");
    // EMFILE from pidfd_open: no pidfd, and /proc unreadable to check by pid either.
    assertEquals(
      [out.seen, out.pin, out.reap, out.stop],
      ["unknown", -24, "late", "unchecked"],
    );
    assertEquals(out.after, { seen: "live", stop: "exited" }, "the fds back, the receipt holds");
    await child.status;
  } finally {
    if (!gone(child.pid)) child.kill("SIGKILL");
    await child.status.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});

// Reads whose "absent" answer decides something (a receipt's instance gone, no mount, no current
// session), run in a child with every fd taken: each must fail EMFILE, never read as absent.
const absentScript = (receipt: string, base: string) => `
const { readReceipt } = await import("${import.meta.resolve("../../src/host/receipt.ts")}");
const { mountedType } = await import("${import.meta.resolve("../../src/fuse/mount.ts")}");
const { currentSession } = await import("${
  import.meta.resolve("../../src/store/session/index.ts")
}");
const reads = {
  receipt: () => readReceipt(${JSON.stringify(receipt)})?.agent,
  mount: () => mountedType("/"),
  session: () => currentSession(${JSON.stringify(base)}),
};
const run = () => Object.fromEntries(Object.entries(reads).map(([k, f]) => {
  try {
    return [k, { value: f() ?? null }];
  } catch (e) {
    return [k, { error: e.errno ?? e.code ?? String(e) }];
  }
}));
const held = [];
let errno = "";
try {
  for (;;) held.push(Deno.openSync("/dev/null"));
} catch (e) {
  errno = e.code;
}
const out = { errno, starved: run() };
for (const f of held) f.close();
out.after = run();
console.log(JSON.stringify(out));
`;

Deno.test("out of fds, a read whose absence decides something fails EMFILE, never reads as absent", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const receipt = receiptOf("t", Deno.pid, { uid: 0 });
    assert(receipt, "this process's receipt");
    const path = writeReceipt(dir, receipt);
    await Deno.mkdir(`${dir}/base/index`, { recursive: true });
    await Deno.writeTextFile(`${dir}/base/index/current`, "s1\n");
    const script = `${dir}/absent.ts`;
    await Deno.writeTextFile(script, absentScript(path, `${dir}/base`));
    const o = await new Deno.Command("prlimit", {
      args: ["--nofile=256:256", Deno.execPath(), "run", "-A", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(o.stderr);
    assert(o.success, `the check process failed: ${err}`);
    const out = JSON.parse(new TextDecoder().decode(o.stdout));
    assertEquals(out.errno, "EMFILE", "every fd of the check process taken");
    const emfile = { error: "EMFILE" };
    assertEquals(out.starved, { receipt: emfile, mount: emfile, session: emfile });
    assertEquals(out.after.receipt, { value: "t" }, "the fds back, the receipt reads");
    assertEquals(out.after.session, { value: "s1" }, "the fds back, the session reads");
    assert(typeof out.after.mount.value === "string", "the fds back, / has a type");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
