/**
 * FUSE workload table: real workloads (untar, find | xargs cat, uncached stat, git clone, rm -rf,
 * 1 GiB write, cold 1 GiB read) on /ctx/home (a real cortexfsd), libfuse's own `passthrough_ll`
 * example (multi-threaded, its default, and single-threaded), the raw backing directory and tmpfs,
 * interleaved in one run. Prints seconds, FUSE requests per workload (counted by the kernel's
 * `fuse:fuse_request_send` tracepoint, per connection: the same count for every server, and none of
 * them slowed by a debug log) and the ratios.
 * Run: tools/deno run -A bench/fuse/workloads.ts [--rounds N] [--base CHECKOUT] [--only a,b]
 * [--targets a,b]
 * `--base` adds the cortexfsd of another checkout (`git archive COMMIT | tar -x -C DIR`): before
 * and after in one run. Needs root (mounts, drop_caches, tracefs).
 */
import { update } from "../../src/store/generation.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const checkout = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const arg = (name: string): string | null => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : null;
};
const rounds = Number(arg("--rounds") ?? 3) || 3;
const base = arg("--base");
const only = arg("--only")?.split(",") ?? null;
/** `--targets a,b`: only the targets whose names start with one of these (A/B runs). */
const pick = arg("--targets")?.split(",") ?? null;
const PTLL_SRC = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c";
/** The small-file tree: DIRS directories of PER files (8,800 files, about 30 MB). */
const DIRS = 440, PER = 20;
const BIG_MIB = 1024;

const dec = new TextDecoder();

async function run(cmd: string, args: string[], cwd?: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}
const sh = (script: string, cwd?: string) => run("bash", ["-c", script], cwd);

/** A small deterministic PRNG (mulberry32): the same tree in every run. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Writes the small-file tree (a source checkout's shape: nested dirs, 100 B - 16 KiB files). */
function makeTree(dir: string): string[] {
  const rnd = prng(12);
  const words = "fuse kernel request reply node path open read write stat lookup attr".split(" ");
  const files: string[] = [];
  for (let d = 0; d < DIRS; d++) {
    const sub = `m${d % 20}/p${Math.floor(d / 20) % 11}/d${d}`;
    Deno.mkdirSync(`${dir}/${sub}`, { recursive: true });
    for (let f = 0; f < PER; f++) {
      const size = Math.floor(100 * Math.pow(160, rnd()));
      let s = "";
      while (s.length < size) {
        s += words[Math.floor(rnd() * words.length)] + (rnd() < 0.1 ? "\n" : " ");
      }
      const name = `${sub}/f${f}.${["ts", "c", "md", "json"][f % 4]}`;
      Deno.writeTextFileSync(`${dir}/${name}`, s.slice(0, size));
      files.push(name);
    }
  }
  return files;
}

/** Request counts per FUSE connection from the `fuse_request_send` tracepoint, in a trace instance of our own. */
class Tracer {
  #root: string;
  #inst: string;
  #mounted: string | null = null;

  private constructor(root: string, mounted: string | null) {
    this.#root = root;
    this.#mounted = mounted;
    this.#inst = `${root}/instances/cortexfs-bench-${Deno.pid}`;
  }

  static async open(work: string): Promise<Tracer | null> {
    for (const r of ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]) {
      try {
        Deno.statSync(`${r}/events/fuse/fuse_request_send`);
        const t = new Tracer(r, null);
        await t.#setup();
        return t;
      } catch { /* not there */ }
    }
    const at = `${work}/tracefs`;
    await Deno.mkdir(at);
    try {
      await run("mount", ["-t", "tracefs", "nodev", at]);
      Deno.statSync(`${at}/events/fuse/fuse_request_send`);
    } catch (e) {
      console.error(`no fuse tracepoint, request counts left out: ${e}`);
      await run("umount", [at]).catch(() => {});
      return null;
    }
    const t = new Tracer(at, at);
    await t.#setup();
    return t;
  }

  async #setup(): Promise<void> {
    await Deno.mkdir(this.#inst);
    Deno.writeTextFileSync(`${this.#inst}/buffer_size_kb`, "65536");
    Deno.writeTextFileSync(`${this.#inst}/events/fuse/fuse_request_send/enable`, "1");
  }

  /** Starts counting the requests of connection `conn` only (the st_dev of its mount root). */
  start(conn: number): void {
    Deno.writeTextFileSync(
      `${this.#inst}/events/fuse/fuse_request_send/filter`,
      `connection == ${conn}`,
    );
    Deno.writeTextFileSync(`${this.#inst}/trace`, "");
  }

  /** Requests since {@link start}, by opcode name (FUSE_ prefix dropped); `lost` when the ring overflowed. */
  stop(): Record<string, number> {
    const text = Deno.readTextFileSync(`${this.#inst}/trace`);
    const counts: Record<string, number> = {};
    for (const m of text.matchAll(/opcode \d+ \(FUSE_(\w+)\)/g)) {
      counts[m[1]] = (counts[m[1]] ?? 0) + 1;
    }
    let lost = 0;
    for (const cpu of Deno.readDirSync(`${this.#inst}/per_cpu`)) {
      const s = Deno.readTextFileSync(`${this.#inst}/per_cpu/${cpu.name}/stats`);
      lost += Number(/overrun: (\d+)/.exec(s)?.[1] ?? 0);
    }
    if (lost) counts.lost = lost;
    return counts;
  }

  async close(): Promise<void> {
    try {
      Deno.writeTextFileSync(`${this.#inst}/events/fuse/fuse_request_send/enable`, "0");
      await Deno.remove(this.#inst);
    } catch { /* best effort */ }
    if (this.#mounted) await run("umount", [this.#mounted]).catch(() => {});
  }
}

/** One place the workloads run in. */
interface Target {
  name: string;
  dir: string;
  /** The FUSE connection number (st_dev of the mount root), for request counts; null if not FUSE. */
  conn: number | null;
}

/** The workloads, in the order they run on each target (each leaves what the next needs). */
interface Workload {
  name: string;
  /** Untimed preparation (cache state). */
  prep?: (t: Target) => Promise<void>;
  run: (t: Target) => Promise<void>;
}

async function dropCaches(): Promise<void> {
  await sh("sync && echo 3 > /proc/sys/vm/drop_caches");
}

function workloads(work: string): Workload[] {
  const tar = `${work}/tree.tar`, src = `${work}/src`, list = `${work}/list`;
  return [
    {
      name: "untar",
      prep: () => sh(`cat ${tar} > /dev/null; sync`).then(() => {}),
      run: (t) => sh(`mkdir ${t.dir}/u && tar -xf ${tar} -C ${t.dir}/u`).then(() => {}),
    },
    {
      name: "find|cat",
      run: (t) => sh(`find ${t.dir}/u -type f -print0 | xargs -0 cat > /dev/null`).then(() => {}),
    },
    {
      name: "stat (uncached)",
      prep: dropCaches,
      run: (t) => sh(`cd ${t.dir}/u && xargs -a ${list} stat -c %s > /dev/null`).then(() => {}),
    },
    {
      name: "git clone",
      prep: () => sh(`cat ${src}/.git/objects/pack/* > /dev/null; sync`).then(() => {}),
      run: (t) => sh(`git clone -q --no-hardlinks ${src} ${t.dir}/g`).then(() => {}),
    },
    {
      name: "rm -rf",
      prep: () => sh("sync").then(() => {}),
      run: (t) => sh(`rm -rf ${t.dir}/u ${t.dir}/g`).then(() => {}),
    },
    {
      name: "write 1 GiB",
      prep: () => sh("sync").then(() => {}),
      run: (t) =>
        sh(`dd if=/dev/zero of=${t.dir}/big bs=1M count=${BIG_MIB} status=none`).then(() => {}),
    },
    {
      name: "read 1 GiB (cold)",
      prep: dropCaches,
      run: (t) =>
        sh(`dd if=${t.dir}/big of=/dev/null bs=1M status=none && rm ${t.dir}/big`)
          .then(() => {}),
    },
  ];
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

async function main() {
  const work = await Deno.makeTempDir({ prefix: "cortexfs-wl-" });
  const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "cortexfs-wl-" });
  const children: Deno.ChildProcess[] = [];
  const mounts: string[] = [];
  let tracer: Tracer | null = null;
  try {
    const cflags = (await run("pkg-config", ["--cflags", "--libs", "fuse3"])).trim().split(/\s+/);
    await run("gcc", ["-O2", "-o", `${work}/ptll`, PTLL_SRC, ...cflags]);

    // the tree, its tarball, a git repository of it, the list of its files for stat
    const gen = `${work}/gen`;
    const files = makeTree(gen);
    await sh(`tar -cf ${work}/tree.tar -C ${gen} .`);
    await sh(
      `cp -a ${gen} ${work}/src && cd ${work}/src && git init -q && git add -A && ` +
        `git -c gc.auto=0 -c user.name=bench -c user.email=bench@localhost commit -qm tree && git repack -adq`,
    );
    Deno.writeTextFileSync(`${work}/list`, files.join("\n") + "\n");
    await Deno.remove(gen, { recursive: true });

    const targets: Target[] = [];
    const fuseTarget = async (name: string, mnt: string, sub: string, child: Deno.ChildProcess) => {
      children.push(child);
      mounts.push(mnt);
      await waitMounted(mnt, child);
      await Deno.mkdir(`${mnt}/${sub}`, { recursive: true }).catch(() => {});
      targets.push({ name, dir: `${mnt}/${sub}`, conn: Deno.statSync(mnt).dev });
    };
    const daemon = async (name: string, tree: string, dir: string) => {
      // a storage tree of its own: a generation is served by one daemon at a time
      const mnt = `${work}/mnt-${dir}`, storage = `${work}/storage-${dir}`;
      await Deno.mkdir(mnt);
      update(storage, { uid: 0, gid: 0 });
      const child = new Deno.Command(`${checkout}/tools/deno`, {
        args: ["run", "-A", `${tree}/cli/cortexfsd.ts`, "--storage", storage, "--mount", mnt]
          .concat(["--run", `${work}/run-${dir}`]),
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      await fuseTarget(name, mnt, `home/0/${dir}`, child);
    };
    await daemon("cortexfsd", checkout, "ours");
    if (base) await daemon("base", base, "base");
    for (const [name, extra] of [["passthrough_ll", []], ["passthrough_ll -s", ["-s"]]] as const) {
      const back = `${work}/back-${extra.length}`, mnt = `${work}/mnt-pt${extra.length}`;
      await Deno.mkdir(back);
      await Deno.mkdir(mnt);
      const child = new Deno.Command(`${work}/ptll`, {
        args: ["-f", ...extra, "-o", `source=${back}`, mnt],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      await fuseTarget(name, mnt, "w", child);
    }
    await Deno.mkdir(`${work}/raw`);
    targets.push({ name: "raw backing dir", dir: `${work}/raw`, conn: null });
    targets.push({ name: "tmpfs", dir: shm, conn: null });

    if (pick) {
      const keep = targets.filter((t) => pick.some((p) => t.name === p));
      targets.splice(0, targets.length, ...keep);
    }
    tracer = await Tracer.open(work);
    const wls = workloads(work).filter((w) => !only || only.some((o) => w.name.startsWith(o)));
    const secs: Record<string, Record<string, number[]>> = {};
    const reqs: Record<string, Record<string, Record<string, number>>> = {};
    for (const t of targets) {
      secs[t.name] = {};
      reqs[t.name] = {};
    }
    for (let r = 0; r < rounds; r++) {
      // alternate the order round by round: load drifts hit every target alike
      const order = r % 2 === 0 ? targets : [...targets].reverse();
      for (const t of order) {
        for (const w of wls) {
          await w.prep?.(t);
          if (t.conn !== null) tracer?.start(t.conn);
          const t0 = performance.now();
          await w.run(t);
          const s = (performance.now() - t0) / 1000;
          if (t.conn !== null && tracer) reqs[t.name][w.name] = tracer.stop();
          (secs[t.name][w.name] ??= []).push(s);
        }
        console.error(`round ${r + 1}: ${t.name} done`);
      }
    }
    report(targets, wls, secs, reqs);
  } finally {
    await tracer?.close();
    for (const c of children) {
      try {
        c.kill("SIGTERM");
      } catch { /* exited */ }
    }
    for (const c of children) await c.status;
    for (const m of mounts) {
      if (mountedType(m) !== null) await run("umount", ["-l", m]).catch(() => {});
    }
    await Deno.remove(shm, { recursive: true }).catch(() => {});
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

function report(
  targets: Target[],
  wls: Workload[],
  secs: Record<string, Record<string, number[]>>,
  reqs: Record<string, Record<string, Record<string, number>>>,
): void {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const total = (c: Record<string, number> | undefined) =>
    c ? Object.entries(c).filter(([k]) => k !== "lost").reduce((n, [, v]) => n + v, 0) : 0;
  console.log(`FUSE workloads: ${DIRS * PER} files, ${BIG_MIB} MiB, median of ${rounds} rounds`);
  console.log(
    `| workload | ${
      targets.map((t) => `${t.name} s${t.conn !== null ? " (requests)" : ""}`).join(" | ")
    } | ` +
      `cortexfsd / tmpfs | passthrough_ll / tmpfs | cortexfsd / passthrough_ll |`,
  );
  console.log(`|---|${targets.map(() => "---").join("|")}|---|---|---|`);
  for (const w of wls) {
    const m = (n: string) => med(secs[n][w.name]);
    const cells = targets.map((t) => {
      const c = reqs[t.name][w.name];
      return `${m(t.name).toFixed(2)}${
        t.conn !== null ? ` (${total(c).toLocaleString("en")})` : ""
      }`;
    });
    const has = (n: string) => secs[n]?.[w.name] !== undefined;
    const ours = m("cortexfsd"),
      pt = has("passthrough_ll") ? m("passthrough_ll") : NaN,
      tmp = has("tmpfs") ? m("tmpfs") : NaN;
    // A ratio over a target left out of the run (--targets) reads "-", not NaN.
    const ratio = (a: number, b: number, digits: number, unit = "") =>
      Number.isNaN(a / b) ? "-" : `${(a / b).toFixed(digits)}${unit}`;
    console.log(
      `| ${w.name} | ${cells.join(" | ")} | ${ratio(ours, tmp, 1, "x")} | ${
        ratio(pt, tmp, 1, "x")
      } | ${ratio(ours, pt, 2)} |`,
    );
  }
  console.log("\nrequests by opcode (last round):");
  for (const w of wls) {
    for (const t of targets) {
      const c = reqs[t.name][w.name];
      if (!c) continue;
      const parts = Object.entries(c).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`);
      console.log(`${w.name.padEnd(18)} ${t.name.padEnd(18)} ${parts.join(", ")}`);
    }
  }
}

if (import.meta.main) await main();
