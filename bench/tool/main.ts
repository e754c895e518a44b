/** bench/tool: `tsh fs.read` (and an ordinary tool, exec'd through its held descriptor) in the sandbox vs bare bwrap vs a bare spawn, as ratios. */
import { replaceFile } from "../../src/store/atomic.ts";
import { update } from "../../src/store/generation.ts";
import { runTsh, tshBundle } from "../../src/tool/mod.ts";

const N = Number(Deno.env.get("BENCH_N") ?? 20);

async function median(fn: () => Promise<void>): Promise<number> {
  await fn(); // warm-up
  const t: number[] = [];
  for (let i = 0; i < N; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}

async function run(cmd: string, args: string[]): Promise<void> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!o.success) throw new Error(`${cmd} failed: ${new TextDecoder().decode(o.stderr)}`);
}

const storage = await Deno.makeTempDir({ prefix: "cortexfs-bench-" });
const ws = await Deno.makeTempDir({ prefix: "cortexfs-bench-ws-" });
try {
  update(storage);
  const root = Deno.realPathSync(`${storage}/current`);
  Deno.writeTextFileSync(`${ws}/file.txt`, "x".repeat(4096));
  await tshBundle();
  const opts = { root, agent: "coder", uid: 0, workspace: ws };
  const bare = await median(() => run("/bin/cat", [`${ws}/file.txt`]));
  const bwrap = await median(() =>
    run("bwrap", [
      "--unshare-all",
      "--unshare-user",
      "--die-with-parent",
      "--ro-bind",
      "/usr",
      "/usr",
      "--symlink",
      "usr/bin",
      "/bin",
      "--symlink",
      "usr/lib",
      "/lib",
      "--symlink",
      "usr/lib64",
      "/lib64",
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--bind",
      ws,
      "/workspace",
      "--chdir",
      "/workspace",
      "--clearenv",
      "--",
      "/bin/cat",
      "file.txt",
    ]) // deno-fmt-ignore
  );
  const tsh = await median(async () => {
    const r = await runTsh(["fs.read", "file.txt"], opts);
    if (r.status !== "ok") throw new Error(r.content);
  });
  // An ordinary user-tier tool: tsh opens it with node:fs, proves its inode and execs
  // /proc/<pid>/fd/<fd> (the price of running exactly the checked file).
  const mine = `${root}/home/0/tool`;
  Deno.mkdirSync(`${mine}/catf.d`, { recursive: true });
  for (
    const [k, v] of Object.entries({
      name: "catf\n",
      description: "cat\n",
      schema: "{}\n",
      cap: "",
    })
  ) {
    replaceFile(`${mine}/catf.d/${k}`, v);
  }
  replaceFile(`${mine}/catf.d/policy`, "allow coder_t tool:catf execute\n");
  replaceFile(`${mine}/catf`, "#!/bin/sh\nexec /bin/cat file.txt\n", { mode: 0o755 });
  const policy = `${root}/agent/coder.d/policy`;
  replaceFile(policy, Deno.readTextFileSync(policy) + "allow coder_t tool:catf execute\n");
  const held = await median(async () => {
    const r = await runTsh(["catf"], opts);
    if (r.status !== "ok") throw new Error(r.content);
  });
  const bash = await median(async () => {
    const r = await runTsh(["bash", "cat file.txt"], opts);
    if (r.status !== "ok") throw new Error(r.content);
  });
  const row = (name: string, ms: number) =>
    console.log(
      `${name.padEnd(34)} ${ms.toFixed(2).padStart(8)} ms  x${(ms / bare).toFixed(1)} bare  x${
        (ms / bwrap).toFixed(1)
      } bwrap`,
    );
  console.log(`median of ${N} runs each (4 KiB file)`);
  row("bare process spawn (/bin/cat)", bare);
  row("bare bwrap spawn (/bin/cat)", bwrap);
  row("tsh fs.read in sandbox (runTsh)", tsh);
  row("tsh bash 'cat' in sandbox", bash);
  row("tsh user tool (held fd exec)", held);
} finally {
  await Deno.remove(storage, { recursive: true }).catch(() => {});
  await Deno.remove(ws, { recursive: true }).catch(() => {});
}
