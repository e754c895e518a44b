/** bench/tool: `tsh fs.read` in the sandbox vs a bare bubblewrap spawn vs a bare process spawn, as ratios. */
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
} finally {
  await Deno.remove(storage, { recursive: true }).catch(() => {});
  await Deno.remove(ws, { recursive: true }).catch(() => {});
}
