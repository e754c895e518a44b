/**
 * FUSE benchmark: the /ctx mount (cortexfsd) against a C libfuse3 low-level reference and tmpfs, all
 * serving the same 10,000-file tree, measured in one run. Prints numbers and ratios.
 * Run: tools/deno run -A bench/fuse/main.ts [--rounds N] [--no-pin] [--base CHECKOUT]
 * `--base` also measures the cortexfsd of another checkout (say, the previous commit unpacked with
 * `git archive`), interleaved with the others: before/after numbers from one run.
 */
import { update } from "../../src/store/generation.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const here = new URL(".", import.meta.url).pathname;
const checkout = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const rounds = Number(Deno.args[Deno.args.indexOf("--rounds") + 1] || 3) || 3;
// Like platform-notes, every server and the client share one CPU (taskset -c 0): numbers on a
// shared 2-core VM are otherwise dominated by cross-CPU wake-ups. `--no-pin` turns it off.
const pin = !Deno.args.includes("--no-pin");
const base = Deno.args.includes("--base") ? Deno.args[Deno.args.indexOf("--base") + 1] : null;
const pinned = (cmd: string, args: string[]): [string, string[]] =>
  pin ? ["taskset", ["-c", "0", cmd, ...args]] : [cmd, args];
const FILES = 10_000;
const MIB = 64;

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return check(cmd, args, out);
}

async function runPinned(cmd: string, args: string[]): Promise<string> {
  const [c, a] = pinned(cmd, args);
  const out = await new Deno.Command(c, { args: a, stdout: "piped", stderr: "piped" }).output();
  return check(cmd, args, out);
}

function check(cmd: string, args: string[], out: Deno.CommandOutput): string {
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return text;
}

async function waitMounted(dir: string, child: Deno.ChildProcess): Promise<void> {
  const end = Date.now() + 20000;
  let exited = false;
  child.status.then(() => (exited = true));
  while (mountedType(dir) === null) {
    if (exited || Date.now() > end) throw new Error(`no mount at ${dir}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function populate(dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (let i = 0; i < FILES; i++) {
    await Deno.writeFile(`${dir}/f${String(i).padStart(5, "0")}`, new Uint8Array(100));
  }
}

interface Result {
  stat: number;
  ls: number;
  write: number;
  read: number;
}

/** Measures every target, interleaved run by run (A, B, C, A, B, C, ...) so load spikes hit all alike. */
async function measure(
  client: string,
  targets: { name: string; dir: string }[],
): Promise<Record<string, Result>> {
  const runs: Record<string, Record<keyof Result, number[]>> = {};
  for (const t of targets) runs[t.name] = { stat: [], ls: [], write: [], read: [] };
  for (let r = 0; r < rounds; r++) {
    for (const t of targets) {
      runs[t.name].stat.push(Number(await runPinned(client, ["stat", t.dir, "2"])));
      const t0 = performance.now();
      await runPinned("bash", ["-c", `cd ${t.dir} && ls -l > /dev/null`]);
      runs[t.name].ls.push(FILES / ((performance.now() - t0) / 1000));
      runs[t.name].write.push(
        Number(await runPinned(client, ["write", `${t.dir}/big`, String(MIB)])),
      );
      runs[t.name].read.push(Number(await runPinned(client, ["read", `${t.dir}/big`])));
      await Deno.remove(`${t.dir}/big`);
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const out: Record<string, Result> = {};
  for (const [k, v] of Object.entries(runs)) {
    out[k] = { stat: med(v.stat), ls: med(v.ls), write: med(v.write), read: med(v.read) };
  }
  return out;
}

/** The C reference server and the stat client, built into `<work>/bin`. */
async function compile(work: string): Promise<string> {
  const bin = `${work}/bin`;
  await Deno.mkdir(bin);
  const cflags = (await run("pkg-config", ["--cflags", "--libs", "fuse3"])).trim().split(/\s+/);
  await run("gcc", ["-O2", "-o", `${bin}/ref`, `${here}/ref.c`, ...cflags]);
  await run("gcc", ["-O2", "-o", `${bin}/client`, `${here}/client.c`]);
  return bin;
}

/** A cortexfsd of the checkout `tree` serving `storage` at `at`, recorded in `children`, mounted. */
async function startDaemon(
  tree: string,
  at: string,
  o: { storage: string; runDir: string; ttl: number; children: Deno.ChildProcess[] },
): Promise<Deno.ChildProcess> {
  const [oc, oa] = pinned(`${checkout}/tools/deno`, [
    "run",
    "-A",
    `${tree}/cli/cortexfsd.ts`,
    "--storage",
    o.storage,
    "--mount",
    at,
    "--run",
    o.runDir,
    "--ttl",
    String(o.ttl),
  ]);
  const c = new Deno.Command(oc, { args: oa, stdout: "null", stderr: "null" }).spawn();
  o.children.push(c);
  await waitMounted(at, c);
  return c;
}

async function main() {
  const work = await Deno.makeTempDir({ prefix: "cortexfs-bench-" });
  const bin = await compile(work);
  const client = `${bin}/client`;

  let shm = "/dev/shm";
  try {
    Deno.statSync(shm);
  } catch {
    shm = work;
  }
  const tmpfs = await Deno.makeTempDir({ dir: shm, prefix: "cortexfs-bench-" });
  const storage = `${work}/storage`,
    mnt = `${work}/mnt`,
    runDir = `${work}/run`,
    refMnt = `${work}/ref`,
    baseMnt = `${work}/mnt-base`;
  await Deno.mkdir(mnt);
  await Deno.mkdir(baseMnt);
  await Deno.mkdir(refMnt);
  update(storage, { uid: 0, gid: 0 });
  const backing = `${Deno.realPathSync(`${storage}/current`)}/home/0/bench`;
  await populate(backing);
  await populate(tmpfs);

  const results: Record<string, Result> = {};
  const children: Deno.ChildProcess[] = [];
  try {
    for (const ttl of [0, 1]) {
      const [rc, ra] = pinned(`${bin}/ref`, [backing, refMnt, String(ttl)]);
      const ref = new Deno.Command(rc, { args: ra, stdout: "null", stderr: "null" }).spawn();
      children.push(ref);
      await waitMounted(refMnt, ref);
      const daemon = (tree: string, at: string) =>
        startDaemon(tree, at, { storage, runDir, ttl, children });
      const ours = await daemon(checkout, mnt);
      const before = base ? await daemon(base, baseMnt) : null;
      const targets = [
        { name: `C ref ttl=${ttl}`, dir: refMnt },
        { name: `cortexfsd ttl=${ttl}`, dir: `${mnt}/home/0/bench` },
        ...(base ? [{ name: `base ttl=${ttl}`, dir: `${baseMnt}/home/0/bench` }] : []),
        ...(ttl === 0 ? [{ name: "tmpfs", dir: tmpfs }] : []),
      ];
      Object.assign(
        results,
        await measure(client, targets),
      );
      await run("fusermount3", ["-u", refMnt]);
      await ref.status;
      for (const c of before ? [ours, before] : [ours]) {
        c.kill("SIGTERM");
        await c.status;
      }
    }
  } finally {
    for (const c of children) {
      try {
        c.kill("SIGKILL");
      } catch { /* exited */ }
    }
    for (const m of [mnt, refMnt, baseMnt]) {
      if (mountedType(m) !== null) await new Deno.Command("umount", { args: ["-l", m] }).output();
    }
    await Deno.remove(tmpfs, { recursive: true }).catch(() => {});
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }

  report(results);
}

/** The results as a markdown table, then cortexfsd's ratios to the reference and tmpfs. */
function report(results: Record<string, Result>) {
  const f = (n: number) => n >= 100 ? Math.round(n).toLocaleString("en") : n.toFixed(2);
  console.log(
    `FUSE benchmark: ${FILES} files, ${MIB} MiB sequential, median of ${rounds} runs${
      pin ? ", all on CPU 0" : ""
    }`,
  );
  console.log("| implementation | stat/s | ls -l files/s | write MiB/s | read MiB/s |");
  console.log("|---|---|---|---|---|");
  for (const [k, r] of Object.entries(results)) {
    console.log(`| ${k} | ${f(r.stat)} | ${f(r.ls)} | ${f(r.write)} | ${f(r.read)} |`);
  }
  console.log("\nratios (cortexfsd / reference):");
  for (const ttl of [0, 1]) {
    const o = results[`cortexfsd ttl=${ttl}`], c = results[`C ref ttl=${ttl}`], t = results.tmpfs;
    console.log(
      `ttl=${ttl}: vs C ref  stat ${f(o.stat / c.stat)}  ls ${f(o.ls / c.ls)}  write ${
        f(o.write / c.write)
      }  read ${f(o.read / c.read)}` +
        `   | vs tmpfs  stat ${f(o.stat / t.stat)}  ls ${f(o.ls / t.ls)}`,
    );
    const b = results[`base ttl=${ttl}`];
    if (b) {
      console.log(
        `ttl=${ttl}: base vs C ref  stat ${f(b.stat / c.stat)}  ls ${f(b.ls / c.ls)}  write ${
          f(b.write / c.write)
        }  read ${f(b.read / c.read)}`,
      );
    }
  }
}

if (import.meta.main) await main();
