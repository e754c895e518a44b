/** Test entry: runs the socket runtime alone (no FUSE) on `--root TREE --run DIR` until SIGTERM. */
import { startRuntime } from "../../src/runtime/mod.ts";

const arg = (name: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const root = arg("--root");
const run = arg("--run");
if (!root || !run) {
  console.error("usage: daemon.ts --root TREE --run DIR [--approval-timeout MS]");
  Deno.exit(2);
}
const timeout = arg("--approval-timeout");
const rt = await startRuntime({
  root,
  run,
  approvalTimeoutMs: timeout ? Number(timeout) : undefined,
  // As cortexfsd does: the daemon's own CTX_TOOL_CACHE reaches runTsh as an option.
  toolCache: Deno.env.get("CTX_TOOL_CACHE"),
}).catch((e) => {
  console.error(`daemon: ${e}`);
  Deno.exit(2);
});
console.log(
  JSON.stringify({
    ready: true,
    pid: Deno.pid,
    agents: rt.agents(),
    recovered: rt.recovered,
    broken: rt.broken,
    failed: rt.failed,
    reaped: rt.reaped,
  }),
);
const stop = async () => {
  await rt.close();
  Deno.exit(0);
};
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
