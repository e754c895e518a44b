/**
 * The uncached stat loop with the servers' CPU per stat: the C libfuse3 reference (`ref.c`) and
 * cortexfsd `--ttl 0` (and `--base`: another checkout's), each serving 10,000 files, measured in
 * interleaved rounds with server and client on CPU 0 (`--no-pin`: anywhere). A server's CPU is read from
 * `/proc/<pid>/task/*\/schedstat` (nanoseconds, every thread) around each round, so it is steadier
 * than stat/s on a shared machine.
 * Run: tools/deno run -A bench/fuse/statcpu.ts [--rounds N] [--passes P] [--base CHECKOUT] [--no-pin]
 * [--servers "LABEL=ARGS;..."] (more cortexfsd targets with those arguments: this checkout's, and
 * with `--base` the base's too)
 */
import { update } from "../../src/store/generation.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const checkout = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const arg = (name: string, d: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : d;
};
const rounds = Number(arg("--rounds", "15"));
/** `--no-pin`: server and client on any CPU (as nobody pins them in use), else both on CPU 0. */
const cpus = Deno.args.includes("--no-pin") ? `0-${navigator.hardwareConcurrency - 1}` : "0";
const passes = Number(arg("--passes", "5"));
const base = Deno.args.includes("--base") ? arg("--base", "") : null;
/** More cortexfsd targets, each with more arguments: `--servers "RR=--mount-priority 1;..."`. */
const servers = arg("--servers", "").split(";").filter((w) => w.includes("=")).map((w) => {
  const at = w.indexOf("=");
  return [w.slice(0, at).trim(), w.slice(at + 1).split(" ").filter(Boolean)] as const;
});

async function sh(cmd: string, args: string[]): Promise<string> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!o.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
  }
  return new TextDecoder().decode(o.stdout);
}

/** Nanoseconds every thread of `pid` has run. */
function cpuNs(pid: number): number {
  let t = 0;
  for (const e of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      t += Number(Deno.readTextFileSync(`/proc/${pid}/task/${e.name}/schedstat`).split(" ")[0]);
    } catch { /* the thread ended */ }
  }
  return t;
}

async function mounted(dir: string, child: Deno.ChildProcess): Promise<void> {
  let exited = false;
  child.status.then(() => exited = true);
  const end = Date.now() + 20_000;
  while (mountedType(dir) === null) {
    if (exited || Date.now() > end) throw new Error(`no mount at ${dir}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const work = await Deno.makeTempDir({ prefix: "cortexfs-statcpu-" });
const children: Deno.ChildProcess[] = [];
const targets: { name: string; dir: string; pid: number }[] = [];
try {
  const cflags = (await sh("pkg-config", ["--cflags", "--libs", "fuse3"])).trim().split(/\s+/);
  await sh("gcc", ["-O2", "-o", `${work}/ref`, `${checkout}/bench/fuse/ref.c`, ...cflags]);
  await sh("gcc", ["-O2", "-o", `${work}/client`, `${checkout}/bench/fuse/client.c`]);
  const storage = `${work}/storage`;
  update(storage, { uid: 0, gid: 0 });
  const backing = `${Deno.realPathSync(`${storage}/current`)}/home/0/bench`;
  Deno.mkdirSync(backing, { recursive: true });
  for (let i = 0; i < 10_000; i++) {
    Deno.writeFileSync(`${backing}/f${String(i).padStart(5, "0")}`, new Uint8Array(100));
  }
  const spawn = async (name: string, dir: string, argv: string[], at: string) => {
    const c = new Deno.Command("taskset", {
      args: ["-c", cpus, ...argv],
      stdout: "null",
      stderr: "null",
    })
      .spawn();
    children.push(c);
    await mounted(dir, c);
    targets.push({ name, dir: at, pid: c.pid }); // taskset execs in place: the pid is the server's
  };
  Deno.mkdirSync(`${work}/m-C`);
  await spawn("C ref", `${work}/m-C`, [`${work}/ref`, backing, `${work}/m-C`, "0"], `${work}/m-C`);
  const builds: (readonly [string, string, readonly string[]])[] = [
    ["cortexfsd", checkout, []],
    ...(base ? [["base", base, []] as const] : []),
    ...servers.flatMap(([name, args]) => [
      [name, checkout, args] as const,
      ...(base ? [[`base ${name}`, base, args] as const] : []),
    ]),
  ];
  for (const [name, tree, more] of builds) {
    const m = `${work}/m-${name}`;
    Deno.mkdirSync(m);
    await spawn(name, m, [
      `${checkout}/tools/deno`,
      "run",
      "-A",
      `${tree}/cli/cortexfsd.ts`,
      "--storage",
      storage,
      "--mount",
      m,
      "--run",
      `${work}/run-${name}`,
      "--ttl",
      "0",
      ...more,
    ], `${m}/home/0/bench`);
  }
  const runs = new Map(targets.map((t) => [t.name, { rate: [] as number[], ns: [] as number[] }]));
  for (const t of targets) await sh("taskset", ["-c", cpus, `${work}/client`, "stat", t.dir, "1"]);
  for (let r = 0; r < rounds; r++) {
    for (const t of r % 2 ? [...targets].reverse() : targets) {
      const c0 = cpuNs(t.pid);
      const rate = Number(
        await sh("taskset", ["-c", cpus, `${work}/client`, "stat", t.dir, String(passes)]),
      );
      const c1 = cpuNs(t.pid);
      runs.get(t.name)!.rate.push(rate);
      runs.get(t.name)!.ns.push((c1 - c0) / (passes * 10_000));
    }
  }
  const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const c = runs.get("C ref")!;
  console.log(
    `stat loop, ${rounds} rounds of ${passes} x 10,000 stats, medians, on CPU ${cpus}`,
  );
  console.log("| server | stat/s | x C ref | server CPU us/stat | x C ref |");
  console.log("|---|---|---|---|---|");
  for (const [name, v] of runs) {
    console.log(
      `| ${name} | ${Math.round(med(v.rate)).toLocaleString("en")} | ${
        (med(v.rate) / med(c.rate)).toFixed(2)
      } | ${(med(v.ns) / 1000).toFixed(2)} | ${(med(v.ns) / med(c.ns)).toFixed(2)} |`,
    );
  }
} finally {
  // the C reference leaves its mount behind when killed: unmount it first, as main.ts does
  if (mountedType(`${work}/m-C`) !== null) {
    await new Deno.Command("fusermount3", { args: ["-u", `${work}/m-C`] }).output();
  }
  for (const c of children) {
    try {
      c.kill("SIGTERM");
    } catch { /* exited */ }
  }
  await Promise.all(children.map((c) => c.status));
  await Deno.remove(work, { recursive: true }).catch(() => {});
}
