/**
 * FUSE benchmark with parallel clients: uncached `stat` throughput with 1 and 2 clients at once,
 * and the CPU the server used meanwhile (cores busy = server CPU seconds / wall seconds), for
 * cortexfsd (`--ttl 0`) and libfuse's `passthrough_ll` (compiled in the run from Debian's
 * libfuse3-dev examples; multi-threaded, its default, and `-s`), with `timeout=0`, all serving
 * the same kind of tree. Nothing is pinned: the point is whether a server uses both cores.
 * Run (root): tools/deno run -A bench/fuse/parallel.ts [--rounds N] [--base CHECKOUT]
 */
import { update } from "../../src/store/generation.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const here = new URL(".", import.meta.url).pathname;
const checkout = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const arg = (name: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const rounds = Number(arg("--rounds") ?? 3) || 3;
/** Files per client directory: client.c stats f00000..f09999. */
const FILES = 10_000;
const base = arg("--base") ?? null;
const PTLL_SRC = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c";
const CLIENTS = [1, 2];
/** Stat rounds over the directory per client and run (each round stats every file once). */
const STAT_ROUNDS = 3;

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

async function waitMounted(dir: string, child: Deno.ChildProcess): Promise<void> {
  const end = Date.now() + 30000;
  let exited = false;
  child.status.then(() => (exited = true));
  while (mountedType(dir) === null) {
    if (exited || Date.now() > end) throw new Error(`no mount at ${dir}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The directory every client stats (f00000..f09999). One for all: with a directory per client,
 * `passthrough_ll` (an O_PATH fd per known inode) ran out of fds at this machine's hard limit.
 */
async function populate(dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (let i = 0; i < FILES; i++) {
    await Deno.writeFile(`${dir}/f${String(i).padStart(5, "0")}`, new Uint8Array(100));
  }
}

/** utime + stime of every thread of `pid`, in seconds (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // fields 14 and 15 of stat(5)
}

interface Target {
  name: string;
  /** The directory the clients stat. */
  dir: string;
  pid: number;
}

interface Sample {
  /** Stats per second, all clients together. */
  rate: number;
  /** Server CPU seconds per wall second. */
  cores: number;
}

/** `n` clients at once, each stat-looping over the directory; wall time from first start to last end. */
async function sample(client: string, t: Target, n: number): Promise<Sample> {
  const cpu0 = cpuSeconds(t.pid);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: n }, () => run(client, ["stat", t.dir, String(STAT_ROUNDS)])),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(t.pid) - cpu0;
  return { rate: (n * STAT_ROUNDS * FILES) / wall, cores: cpu / wall };
}

async function main() {
  const work = await Deno.makeTempDir({ prefix: "cortexfs-par-" });
  const children: Deno.ChildProcess[] = [];
  const mounts: string[] = [];
  const targets: Target[] = [];
  const results: Record<string, Record<number, Sample[]>> = {};
  try {
    const cflags = (await run("pkg-config", ["--cflags", "--libs", "fuse3"])).trim().split(/\s+/);
    await run("gcc", ["-O2", "-o", `${work}/ptll`, PTLL_SRC, ...cflags]);
    await run("gcc", ["-O2", "-o", `${work}/client`, `${here}/client.c`]);
    const client = `${work}/client`;

    const daemon = async (name: string, tree: string, dir: string) => {
      const mnt = `${work}/mnt-${dir}`, storage = `${work}/storage-${dir}`;
      await Deno.mkdir(mnt);
      update(storage, { uid: 0, gid: 0 });
      await populate(`${Deno.realPathSync(`${storage}/current`)}/home/0/bench`);
      const child = new Deno.Command(`${checkout}/tools/deno`, {
        args: ["run", "-A", `${tree}/cli/cortexfsd.ts`, "--storage", storage, "--mount", mnt]
          .concat(["--run", `${work}/run-${dir}`, "--ttl", "0"]),
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      children.push(child);
      mounts.push(mnt);
      await waitMounted(mnt, child);
      targets.push({ name, dir: `${mnt}/home/0/bench`, pid: child.pid });
    };
    await daemon("cortexfsd", checkout, "ours");
    if (base) await daemon("base", base, "base");
    for (const [name, extra] of [["passthrough_ll", []], ["passthrough_ll -s", ["-s"]]] as const) {
      const back = `${work}/back-${extra.length}`, mnt = `${work}/mnt-pt${extra.length}`;
      await Deno.mkdir(mnt);
      await populate(back);
      const child = new Deno.Command(`${work}/ptll`, {
        args: ["-f", ...extra, "-o", `source=${back},timeout=0`, mnt],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      children.push(child);
      mounts.push(mnt);
      await waitMounted(mnt, child);
      targets.push({ name, dir: mnt, pid: child.pid });
    }

    for (const t of targets) results[t.name] = { 1: [], 2: [] };
    for (let r = 0; r < rounds; r++) {
      // alternate the order round by round: load drifts hit every target alike
      const order = r % 2 === 0 ? targets : [...targets].reverse();
      for (const t of order) {
        for (const n of CLIENTS) results[t.name][n].push(await sample(client, t, n));
      }
    }
  } finally {
    for (const m of mounts) {
      if (mountedType(m) !== null) await new Deno.Command("umount", { args: ["-l", m] }).output();
    }
    for (const c of children) {
      try {
        c.kill("SIGTERM");
      } catch { /* exited */ }
      await c.status;
    }
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }

  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const f = (n: number) => n >= 100 ? Math.round(n).toLocaleString("en") : n.toFixed(2);
  console.log(
    `Parallel uncached stat: ${FILES} files, ${STAT_ROUNDS} passes per client, median of ${rounds} runs, nothing pinned`,
  );
  console.log("| server | 1 client stat/s | cores | 2 clients stat/s | cores | 2 vs 1 |");
  console.log("|---|---|---|---|---|---|");
  for (const t of targets) {
    const one = results[t.name][1], two = results[t.name][2];
    const r1 = med(one.map((s) => s.rate)), r2 = med(two.map((s) => s.rate));
    console.log(
      `| ${t.name} | ${f(r1)} | ${f(med(one.map((s) => s.cores)))} | ${f(r2)} | ${
        f(med(two.map((s) => s.cores)))
      } | ${f(r2 / r1)} |`,
    );
  }
}

if (import.meta.main) await main();
