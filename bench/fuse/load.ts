/**
 * Stat latency under load: another process stats `<mount>/status` and a `home/` file once a ms,
 * first with the daemon idle, then while one agent streams 20,000 deltas and another runs 20 tool
 * calls through the same cortexfsd; in the same loop a file through libfuse's passthrough_ll with
 * nothing cached (a userspace server's share of the same load) and one on tmpfs (the kernel's).
 * Prints p50/p99/max of each phase, the ratio to idle and to each reference under load, and where
 * the load's CPU went (the instances and their steps, the `ctx` clients, cortexfsd).
 * Never asserts a duration. Run: tools/deno run -A bench/fuse/load.ts [--deltas 20000]
 * [--calls 20] [--rounds 1] [--idle-ms 2000] [--agents "LABEL:SPEC ..."] [--alone N] [--setsid]
 * [--servers "LABEL=ARGS;LABEL=ARGS"].
 * `status` is served by the loaded cortexfsd with no scheduling flag (cortexfsd's default); each
 * `--servers` entry is one more cortexfsd with those arguments, nothing loading it, whose
 * `status LABEL` is stat'ed in the same loop (default `ordinary=--mount-priority 0`: the serving
 * thread always at the ordinary policy): several policies under one load in one run.
 *
 * `--agents` adds agent variants, each a cortexfsd of its own whose two agents (the flood, `coder`)
 * are started before the phases and then lowered from outside, every thread of the instance (so
 * every step it spawns inherits it): SPEC is comma-separated `nice=N` (setpriority of each
 * thread), `policy=batch|idle` (SCHED_BATCH / SCHED_IDLE), `autogroup=N` (the nice of the
 * instance's session autogroup, sched(7): the instance is a session leader, and with autogroups a
 * task's nice only weighs against its own session's tasks), and, a diagnostic only, `client=idle`
 * or `client=n19` (the bench's own `ctx` clients, the user's processes, under SCHED_IDLE or nice
 * 19); `args=A+B` gives the variant's cortexfsd more arguments (`+` for a space, say
 * `args=--mount-priority+1`), so a policy is measured on the daemon that serves the agents' own
 * traffic too. The variants' load phases alternate in order round by round, each right after an
 * idle phase of its own (other users of the machine come and go). `--alone N`: then the flood agent's
 * `ctx agent send` N times per variant with nothing else running (interleaved), wall time.
 * `--setsid`: every cortexfsd in a session of its own, as a service is (default: this one's).
 * `--lat-rr`, a diagnostic: the client that times the stats runs at SCHED_RR 1 (`chrt`), so what
 * is left of a p99 is the servers' and the kernel's, not the client's own wake-up on busy CPUs.
 */
import { cleanup, CTX, type Daemon, DENO, makeTree, startDaemon } from "../../tests/fixture/mod.ts";
import { createAgent } from "../../src/store/agent_new.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const sarg = (name: string, dflt: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : dflt;
};
const DELTAS = arg("--deltas", 20000), CALLS = arg("--calls", 20);
const ROUNDS = arg("--rounds", 1), IDLE_MS = arg("--idle-ms", 2000), ALONE = arg("--alone", 0);
const SETSID = Deno.args.includes("--setsid") ? ["setsid"] : [];
/** `--lat-rr` (a diagnostic): the stat-timing client at SCHED_RR 1, so its own wake-up waits for no one. */
const LAT_PREFIX = Deno.args.includes("--lat-rr") ? ["chrt", "-r", "1"] : [];
/** The unloaded daemons stat'ed in the same loop: label and cortexfsd arguments. */
const SERVERS = sarg("--servers", "ordinary=--mount-priority 0").split(";")
  .filter((w) => w.trim())
  .map((w) => {
    const at = w.indexOf("=");
    return {
      label: at < 0 ? w.trim() : w.slice(0, at).trim(),
      args: at < 0 ? [] : w.slice(at + 1).split(" ").filter(Boolean),
    };
  });
/** `as-host` (nothing changed) first, then `--agents`' LABEL:SPEC words. */
const VARIANTS = ["as-host:", ...sarg("--agents", "").split(" ").filter(Boolean)].map((w) => {
  const [label, spec = ""] = w.split(":");
  const kv = Object.fromEntries(spec.split(",").filter(Boolean).map((x) => x.split("=")));
  return { label, kv: kv as Record<string, string> };
});

const HERE = new URL(".", import.meta.url).pathname;

/** libfuse's own low-level example (Debian libfuse3-dev), compiled in the run, never copied. */
const PTLL_SRC = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c";

async function gcc(args: string[]): Promise<void> {
  const out = await new Deno.Command("gcc", { args: ["-O2", ...args] }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
}

/** Compiles bench/fuse/client.c (its `lat` mode: paced stat(2) latencies) into `dir`. */
async function client(dir: string): Promise<string> {
  await gcc(["-o", `${dir}/client`, `${HERE}client.c`]);
  return `${dir}/client`;
}

/**
 * passthrough_ll (multi-threaded) over `back` at `mnt` with entry and attribute timeouts 0: a stat
 * of a file there costs the same LOOKUP + GETATTR round trips to a userspace server as a stat of
 * `/ctx/status`, so under the same load it shows what any FUSE server's thread pays for CPU.
 */
async function passthroughLl(dir: string, back: string, mnt: string): Promise<Deno.ChildProcess> {
  const flags = new TextDecoder().decode(
    (await new Deno.Command("pkg-config", { args: ["--cflags", "--libs", "fuse3"] }).output())
      .stdout,
  ).trim().split(/\s+/);
  await gcc(["-o", `${dir}/ptll`, PTLL_SRC, ...flags]);
  const child = new Deno.Command(`${dir}/ptll`, {
    args: ["-f", "-o", `source=${back},timeout=0,cache=never`, mnt],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const dev = Deno.statSync(dir).dev;
  // Mounted once the mount point is another filesystem's root.
  for (let i = 0; Deno.statSync(mnt).dev === dev; i++) {
    if (i > 3000) throw new Error("passthrough_ll did not mount");
    await new Promise((r) => setTimeout(r, 10));
  }
  return child;
}

/**
 * Stats the paths (one stat(2) each per millisecond, from one long-lived process: the syscall is
 * timed, not a fork and exec) until `phase()` settles; returns the latencies (ns) per path.
 */
async function sample(
  bin: string,
  paths: string[],
  stop: string,
  phase: () => Promise<void>,
): Promise<Record<string, number[]>> {
  const [cmd, ...pre] = [...LAT_PREFIX, bin];
  const child = new Deno.Command(cmd, { args: [...pre, "lat", stop, ...paths], stdout: "piped" })
    .spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("ready\n")) text += (await reader.read()).value ?? "";
  text = text.slice(text.indexOf("ready\n") + 6);
  const rest = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
  })();
  await phase();
  Deno.writeTextFileSync(stop, "");
  await rest;
  if (!(await child.status).success) throw new Error("a stat failed");
  const out: Record<string, number[]> = Object.fromEntries(paths.map((p) => [p, []]));
  for (const line of text.trim().split("\n")) {
    const [i, t] = line.split(" ");
    out[paths[Number(i)]]?.push(Number(t));
  }
  return out;
}

function stats(ns: number[]) {
  const s = [...ns].sort((a, b) => a - b);
  const q = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))] / 1e6;
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s[s.length - 1] / 1e6 };
}

/** Fields 3.. of /proc/<pid>/stat (field n is f[n - 3]), or null once it is gone. */
function statOf(path: string): string[] | null {
  try {
    const st = Deno.readTextFileSync(path);
    return st.slice(st.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** Seconds of CPU a process and its reaped children used (utime+stime+cutime+cstime). */
function cpuOf(pid: number): number {
  const f = pid > 0 ? statOf(`/proc/${pid}/stat`) : null;
  return f ? (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100 : 0;
}

/** `nice N policy P autogroup nice A` of a process (sched(7) policy numbers), as /proc says. */
function schedOf(pid: number): string {
  const f = statOf(`/proc/${pid}/stat`);
  if (!f) return "gone";
  let ag = "?";
  try {
    ag = Deno.readTextFileSync(`/proc/${pid}/autogroup`).trim().replace(/^.* nice /, "");
  } catch { /* no autogroups in this kernel */ }
  return `nice ${f[16]} policy ${f[38]} autogroup ${ag}`;
}

/** The scheduling of a running process whose argv holds `needle` (a step: the flood's program), or "not seen". */
function stepSched(needle: string): string {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes(needle)) {
        return schedOf(Number(e.name));
      }
    } catch { /* gone meanwhile */ }
  }
  return "not seen";
}

function instancePid(run: string, name: string): number {
  return JSON.parse(Deno.readTextFileSync(`${run}/instance/${name}.json`)).pid;
}

async function run(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Lowers every thread of `pid` as `kv` says (nice, policy, autogroup); later threads and children inherit it. */
async function lower(pid: number, kv: Record<string, string>): Promise<void> {
  const tids = [...Deno.readDirSync(`/proc/${pid}/task`)].map((e) => e.name);
  if (kv.nice) await run("renice", ["-n", kv.nice, "-p", ...tids]);
  if (kv.policy) await run("chrt", ["-a", `--${kv.policy}`, "-p", "0", String(pid)]);
  if (kv.autogroup) Deno.writeTextFileSync(`/proc/${pid}/autogroup`, kv.autogroup);
}

/** The middle value (the upper one of an even count). */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Loaded {
  label: string;
  kv: Record<string, string>;
  tree: Awaited<ReturnType<typeof makeTree>>;
  d: Daemon | null;
  home: string;
  status: string;
  /**
   * Per round (ms): `status` under load p99 and max, its idle p99, each server's (by label) load
   * p99 and max and idle p99, the flood's send.
   */
  seen: {
    p99: number;
    max: number;
    idle: number;
    servers: Record<string, { p99: number; max: number; idle: number }>;
    flood: number;
  }[];
}

const servers: {
  label: string;
  args: string[];
  tree: Awaited<ReturnType<typeof makeTree>>;
  d: Daemon | null;
  status: string;
}[] = [];
for (const s of SERVERS) {
  const tree = await makeTree();
  servers.push({ ...s, tree, d: null, status: `${tree.mount}/status` });
}
const scratch = await makeTree();
const loaded: Loaded[] = [];
let ptll: Deno.ChildProcess | null = null;
const ptMnt = `${scratch.dir}/ptll-mnt`;
const ref = `/dev/shm/cortexfs-load-${Deno.pid}`;
try {
  const bin = await client(scratch.dir);
  // The user's side: each `ctx` a process of this session, its CPU time taken by time(1).
  const cpu = { send: 0, tsh: 0 };
  const ctx = async (l: Loaded, args: string[]) => {
    const t = `${scratch.dir}/time-${crypto.randomUUID()}`;
    const pre = l.kv.client === "idle"
      ? ["chrt", "--idle", "0"]
      : l.kv.client === "n19"
      ? ["nice", "-n", "19"]
      : [];
    const out = await new Deno.Command("/usr/bin/time", {
      args: ["-o", t, "-f", "%U %S", ...pre, DENO, "run", "-A", "--quiet", CTX, ...args],
      cwd: l.tree.dir,
      env: { CTX_ROOT: l.tree.mount },
      stdout: "null",
      stderr: "null",
    }).output();
    const [u, s] = Deno.readTextFileSync(t).trim().split("\n").pop()!.split(" ").map(Number);
    cpu[args[1] === "send" ? "send" : "tsh"] += u + s;
    if (!out.success) throw new Error(`ctx ${args.join(" ")} failed`);
  };
  for (const { label, kv } of VARIANTS) {
    const tree = await makeTree();
    // The flood agent: one delta frame per line, then its message.
    const flood = `${tree.dir}/flood.sh`;
    Deno.writeTextFileSync(
      flood,
      `#!/bin/bash\nread -r _\nfor ((i = 0; i < ${DELTAS}; i++)); do printf '{"type":"delta","text":"w%d "}\\n' $i; done\n` +
        `printf '{"type":"message","role":"assistant","content":"flooded"}\\n'\n`,
    );
    createAgent(tree.root, "flood", { uid: 0, gid: 0, exec: flood });
    const l: Loaded = {
      label,
      kv,
      tree,
      d: null,
      home: "",
      status: `${tree.mount}/status`,
      seen: [],
    };
    loaded.push(l);
    // Its instances live through every phase (no idle exit), started and lowered before them.
    l.d = await startDaemon(tree, {
      args: ["--idle-timeout", "3600", ...(kv.args ? kv.args.split("+") : [])],
      wrap: SETSID,
    });
    l.home = `${tree.mount}/home/0/bench.txt`;
    Deno.writeTextFileSync(l.home, "x\n");
    for (const a of ["flood", "coder"]) {
      await ctx(l, ["agent", "start", a]);
      await lower(instancePid(tree.run, a), kv);
    }
  }
  // More cortexfsd daemons (say, the serving thread at SCHED_RR 1), stat'ed in the same loop under
  // the same load (the load runs through a loaded daemon's agents): several policies in one run.
  for (const s of servers) s.d = await startDaemon(s.tree, { args: s.args, wrap: SETSID });
  // The reference in the same loop: a file on tmpfs, off the mount. Its latency under load is what
  // the machine itself adds (a 2-core VM: the flood and the tool calls' processes compete for
  // the CPU with the stat processes); the mount's own share is the ratio to it.
  Deno.writeTextFileSync(ref, "x\n");
  // And a file through libfuse's passthrough_ll with nothing cached: a userspace server's share.
  Deno.mkdirSync(`${scratch.dir}/ptll-back`);
  Deno.mkdirSync(ptMnt);
  Deno.writeTextFileSync(`${scratch.dir}/ptll-back/f`, "x\n");
  ptll = await passthroughLl(scratch.dir, `${scratch.dir}/ptll-back`, ptMnt);
  const pt = `${ptMnt}/f`;
  const name = (l: Loaded, p: string) =>
    p === ref
      ? "tmpfs (ref)"
      : p === pt
      ? "passthrough_ll"
      : servers.find((s) => s.status === p)
      ? `status ${servers.find((s) => s.status === p)!.label}`
      : p.slice(l.tree.mount.length + 1);
  const f = (v: number) => v.toFixed(2).padStart(7);
  console.log(
    `stat latency, idle vs one agent streaming ${DELTAS} deltas + ${CALLS} tool calls; ${ROUNDS} round(s), ${VARIANTS.length} agent variant(s)`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    for (const l of r % 2 === 0 ? loaded : [...loaded].reverse()) {
      const paths = [l.status, l.home, ...servers.map((s) => s.status), pt, ref];
      const idle = await sample(
        bin,
        paths,
        `${scratch.dir}/stop-idle-${r}-${l.label}`,
        async () => {
          for (let i = 0; i < IDLE_MS / 5; i++) await new Promise((r) => setTimeout(r, 5));
        },
      );
      const pids = [instancePid(l.tree.run, "flood"), instancePid(l.tree.run, "coder")];
      const before = { d: cpuOf(l.d!.child.pid), i: pids.map(cpuOf), ...cpu };
      let floodMs = 0, step = "not seen";
      const t = performance.now();
      const load = await sample(
        bin,
        paths,
        `${scratch.dir}/stop-load-${r}-${l.label}`,
        async () => {
          await Promise.all([
            ctx(l, ["agent", "send", "flood", "go"]).then(() => floodMs = performance.now() - t),
            (async () => {
              // The flood's program (a step) as the kernel schedules it: its path in the sandbox.
              for (let i = 0; i < 100 && step === "not seen" && floodMs === 0; i++) {
                await new Promise((r) => setTimeout(r, 10));
                step = stepSched("/ctx/agent/flood");
              }
            })(),
            (async () => {
              for (let i = 0; i < CALLS; i++) {
                await ctx(l, ["agent", "tsh", "coder", "--", "fs.stat", "."]);
              }
            })(),
          ]);
        },
      );
      const wall = (performance.now() - t) / 1000;
      const inst = pids.reduce((a, p, k) => a + cpuOf(p) - before.i[k], 0);
      const dae = cpuOf(l.d!.child.pid) - before.d;
      console.log(
        `round ${r + 1}, agents ${l.label} (instance ${
          schedOf(pids[0])
        }; its step ${step}): flood ${floodMs.toFixed(0)} ms, load ${
          wall.toFixed(1)
        } s; CPU s: instances+steps ${inst.toFixed(1)}, ctx send ${
          (cpu.send - before.send).toFixed(1)
        }, ctx tsh ${(cpu.tsh - before.tsh).toFixed(1)}, cortexfsd ${dae.toFixed(1)}`,
      );
      const u = stats(load[pt]);
      for (const p of paths) {
        const i = stats(idle[p]), lo = stats(load[p]);
        console.log(
          `  ${name(l, p).padEnd(16)} idle n=${i.n} p50 ${f(i.p50)} p99 ${f(i.p99)} max ${
            f(i.max)
          } | load n=${lo.n} p50 ${f(lo.p50)} p99 ${f(lo.p99)} max ${f(lo.max)} ms | p99 ${
            (lo.p99 / i.p99).toFixed(2)
          }x idle; under load p99 ${(lo.p99 / u.p99).toFixed(2)}x passthrough_ll, max ${
            (lo.max / u.max).toFixed(2)
          }x`,
        );
      }
      const s = stats(load[l.status]);
      l.seen.push({
        p99: s.p99,
        max: s.max,
        idle: stats(idle[l.status]).p99,
        servers: Object.fromEntries(servers.map((x) => {
          const lo = stats(load[x.status]);
          return [x.label, { p99: lo.p99, max: lo.max, idle: stats(idle[x.status]).p99 }];
        })),
        flood: floodMs,
      });
    }
  }
  console.log("medians over the rounds (ms):");
  for (const l of loaded) {
    const m = (k: "p99" | "max" | "idle" | "flood") => median(l.seen.map((x) => x[k])).toFixed(2);
    const each = (k: "p99" | "max" | "idle") => l.seen.map((x) => x[k].toFixed(2)).join(" ");
    console.log(
      `  agents ${l.label.padEnd(12)} status idle p99 ${m("idle")}, load p99 ${m("p99")} max ${
        m("max")
      } (rounds: idle p99 ${each("idle")}; load p99 ${each("p99")}; max ${
        each("max")
      }); flood under load ${m("flood")}`,
    );
    for (const x of servers) {
      const v = l.seen.map((r) => r.servers[x.label]);
      const sm = (k: "p99" | "max" | "idle") => median(v.map((r) => r[k])).toFixed(2);
      const se = (k: "p99" | "max" | "idle") => v.map((r) => r[k].toFixed(2)).join(" ");
      console.log(
        `    status ${x.label.padEnd(12)} idle p99 ${sm("idle")}, load p99 ${sm("p99")} max ${
          sm("max")
        } (rounds: idle p99 ${se("idle")}; load p99 ${se("p99")}; max ${se("max")})`,
      );
    }
  }
  // The agent's own speed with nothing else running: the flood alone, per variant, interleaved.
  if (ALONE > 0) {
    const ms = new Map<Loaded, number[]>(loaded.map((l) => [l, []]));
    for (let r = 0; r < ALONE; r++) {
      for (const l of r % 2 === 0 ? loaded : [...loaded].reverse()) {
        const t = performance.now();
        await ctx(l, ["agent", "send", "flood", "go"]);
        ms.get(l)!.push(performance.now() - t);
      }
    }
    for (const l of loaded) {
      const xs = ms.get(l)!;
      console.log(
        `alone, agents ${l.label}: flood send median ${median(xs).toFixed(0)} ms (${
          xs.map((x) => x.toFixed(0)).join(" ")
        })`,
      );
    }
  }
} finally {
  try {
    Deno.removeSync(ref);
  } catch { /* never made */ }
  if (ptll) {
    await new Deno.Command("fusermount3", { args: ["-u", ptMnt] }).output();
    await ptll.status;
  }
  for (const s of servers) await cleanup(s.tree, s.d);
  for (const l of loaded) await cleanup(l.tree, l.d);
  await cleanup(scratch);
}
