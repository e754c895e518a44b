/**
 * Startup without a stall: a tree of BENCH_AGENTS (default 10,000) agents, each with one session
 * of history, laid out directly in the backing storage (the layout a migration-built tree has).
 * Starts a real cortexfsd and prints, in ms from the moment the mount appears: `ls` of the mount
 * root, `stat` of /ctx/status, `ls` of /ctx/agent; then when the host has armed every socket, and a
 * cold (instance start) and warm `send` to one agent. (The single in-process runtime it was once
 * compared with is gone: production and tests run only host -> per-agent instance.)
 * Prints numbers; asserts no duration.
 */
import { cleanup, ctxRun, makeTree, startDaemon } from "../../tests/fixture/mod.ts";
import { mountedType } from "../../src/fuse/mount.ts";

const N = Number(Deno.env.get("BENCH_AGENTS") ?? 10_000);

/** Every file below `dir` (relative path, bytes, mode) and every directory, read once. */
function snapshot(dir: string, rel = ""): { dirs: string[]; files: [string, string, number][] } {
  const out = { dirs: [rel], files: [] as [string, string, number][] };
  for (const e of Deno.readDirSync(`${dir}${rel}`)) {
    const p = `${rel}/${e.name}`;
    if (e.isDirectory) {
      const sub = snapshot(dir, p);
      out.dirs.push(...sub.dirs);
      out.files.push(...sub.files);
    } else if (e.isFile) {
      const mode = (Deno.statSync(`${dir}${p}`).mode ?? 0o644) & 0o777;
      out.files.push([p, Deno.readTextFileSync(`${dir}${p}`), mode]);
    }
  }
  return out;
}

function lay(to: string, snap: ReturnType<typeof snapshot>, rename: (t: string) => string): void {
  for (const d of snap.dirs) Deno.mkdirSync(`${to}${d}`, { recursive: true });
  for (const [p, text, mode] of snap.files) {
    Deno.writeTextFileSync(`${to}${p}`, rename(text), { mode });
    if (mode & 0o022) Deno.chmodSync(`${to}${p}`, mode); // past the umask
  }
}

const tree = await makeTree();
try {
  // One real session (made by the runtime) to give every agent a history to index.
  const seed = await startDaemon(tree);
  const first = await ctxRun(["agent", "send", "coder", "hello"], {
    env: { CTX_ROOT: tree.mount },
  });
  if (first.code !== 0) throw new Error(`seed send failed: ${first.stderr}`);
  await seed.stop();

  const t0 = performance.now();
  const a = `${tree.root}/agent`;
  const home = `${tree.root}/home/0/agent`;
  const entry = Deno.readTextFileSync(`${a}/coder`);
  const controls = snapshot(`${a}/coder.d`), history = snapshot(`${home}/coder`);
  for (let i = 0; i < N; i++) {
    const name = `a${String(i).padStart(5, "0")}`;
    Deno.writeTextFileSync(`${a}/.${name}.tmp`, entry, { mode: 0o755 });
    Deno.chmodSync(`${a}/.${name}.tmp`, 0o755);
    lay(`${a}/${name}.d`, controls, (t) => t.replace('"name":"coder"', `"name":"${name}"`));
    lay(`${home}/${name}`, history, (t) => t);
    Deno.renameSync(`${a}/.${name}.tmp`, `${a}/${name}`); // entry last, as ctx agent new does
  }
  const made = performance.now() - t0;

  const spawned = performance.now();
  const d = await startDaemon(tree, { wait: false });
  // A bench may spin: it measures when the mount appears.
  while (mountedType(tree.mount) === null) await new Promise((r) => setTimeout(r, 1));
  const mounted = performance.now();
  const timed = async (fn: () => Promise<unknown>) => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  let rootEntries = 0, agentEntries = 0;
  const lsRoot = await timed(async () => {
    for await (const _ of Deno.readDir(tree.mount)) rootEntries++;
  });
  const lsRootAt = performance.now() - mounted;
  const statStatus = await timed(() => Deno.stat(`${tree.mount}/status`));
  const lsAgent = await timed(async () => {
    for await (const _ of Deno.readDir(`${tree.mount}/agent`)) agentEntries++;
  });
  while (!d.log().includes("agent sockets under")) await new Promise((r) => setTimeout(r, 5));
  const armed = performance.now() - mounted;
  const target = `a${String(Math.floor(N / 2)).padStart(5, "0")}`;
  const env = { CTX_ROOT: tree.mount };
  const cold = await timed(() => ctxRun(["agent", "send", target, "cold"], { env }));
  const warm = await timed(() => ctxRun(["agent", "send", target, "warm"], { env }));
  const direct = await timed(() => ctxRun(["status"], { env })); // ctx's own start, for scale
  await d.stop();
  const f = (x: number) => Math.round(x * 10) / 10;
  console.log(JSON.stringify({
    agents: N,
    tree_made_ms: f(made),
    mount_appeared_after_spawn_ms: f(mounted - spawned),
    ls_root_ms: f(lsRoot),
    ls_root_done_after_mount_ms: f(lsRootAt),
    root_entries: rootEntries,
    stat_status_ms: f(statStatus),
    ls_agent_ms: f(lsAgent),
    agent_entries: agentEntries,
    all_sockets_armed_after_mount_ms: f(armed),
    send_cold_instance_ms: f(cold),
    send_warm_ms: f(warm),
    ctx_status_ms: f(direct),
  }));
} finally {
  await cleanup(tree);
}
