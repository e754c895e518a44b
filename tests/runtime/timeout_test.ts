/** The start timeout with real parts: cortexfsd as host, an instance that hangs before `ready` (the test hook), the ctx CLI as the waiting clients. */
import { assert, assertEquals } from "../assert.ts";
import { cleanup, ctxRun, type Daemon, makeTree, startDaemon } from "../fixture/mod.ts";

const root = Deno.uid() === 0;
const read = (p: string) => Deno.readTextFileSync(p);

Deno.test({
  name:
    "start timeout: an instance hung before ready is stopped by its receipt and recorded failed; its waiting clients get ETIMEDOUT; the next connection starts a new one",
  ignore: !root,
  async fn() {
    const tree = await makeTree();
    // The hook's flag: the first instance that removes it hangs before it serves (src/runtime/
    // instance.ts HANG_HOOK); only the environment cortexfsd starts with names it.
    const flag = `${tree.dir}/hang-once`;
    Deno.writeTextFileSync(flag, "");
    let d: Daemon | null = null;
    const d_ = `${tree.root}/agent/coder.d`;
    const ctx = (args: string[]) => ctxRun(args, { env: { CTX_ROOT: tree.mount } });
    try {
      // Short, but longer than a normal instance start under load (the last send needs one).
      d = await startDaemon(tree, {
        args: ["--start-timeout", "8"],
        wrap: ["env", `CORTEXFS_TEST_HANG_BEFORE_READY=${flag}`],
      });
      // The client's connection starts the instance, which hangs; the client waits in the backlog.
      const failed = await ctx(["agent", "send", "coder", "one"]);
      assertEquals(failed.code !== 0, true, failed.stdout);
      assert(failed.stderr.includes("ETIMEDOUT"), failed.stderr);
      assert(failed.stderr.includes("its instance was not ready within"), failed.stderr);
      // The frame went out after the exit was recorded (the receipt removed last of all).
      assertEquals([...Deno.readDirSync(`${tree.run}/instance`)].map((e) => e.name), []);
      assertEquals([read(`${d_}/status`), read(`${d_}/pid`)], ["dead\n", ""]);
      const hung = JSON.parse(read(`${d_}/meta.json`)).receipt;
      assertEquals(hung.exit.signal, "SIGTERM");
      const log = read(`${d_}/log`);
      assert(
        log.includes(
          `agent.start unit=cortexfs-agent-coder invocation=${hung.invocation} pid=${hung.pid}`,
        ),
        log,
      );
      assert(
        log.includes(
          "instance coder: test hook CORTEXFS_TEST_HANG_BEFORE_READY: hanging before ready",
        ),
        log,
      );
      assert(
        log.includes(`instance coder pid ${hung.pid} not ready within`) &&
          log.includes("(start timeout): stopping it\n"),
        log,
      );
      assert(log.includes(`instance coder pid ${hung.pid} exited (signal SIGTERM): failed`), log);

      // `ctx agent start` of an instance that hangs hears the same (and nothing is left running).
      Deno.writeTextFileSync(flag, "");
      const started = await ctx(["agent", "start", "coder"]);
      assertEquals(started.code !== 0, true, started.stdout);
      assert(started.stderr.includes("ETIMEDOUT"), started.stderr);
      assert(started.stderr.includes("was not ready within"), started.stderr);
      const again = JSON.parse(read(`${d_}/meta.json`)).receipt;
      assert(again.invocation !== hung.invocation && again.exit.signal === "SIGTERM", again);
      assertEquals([read(`${d_}/status`), read(`${d_}/pid`)], ["dead\n", ""]);

      // The flag is consumed: the next connection starts an instance that serves.
      const next = await ctx(["agent", "send", "coder", "two"]);
      assertEquals([next.code, next.stdout], [0, "two\n"], next.stderr);
      const second = JSON.parse(read(`${tree.run}/instance/coder.json`));
      assert(second.pid !== hung.pid && second.pid !== again.pid);
      assertEquals(read(`${d_}/status`), "ready\n");
    } finally {
      await cleanup(tree, d);
    }
  },
});
