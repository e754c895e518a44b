/** The host writes an instance's `status` and `pid` from its reports (src/host/supervisor.ts), with a stand-in instance on the real supervisor: real sockets, real processes, real files. */
import { assertEquals } from "../assert.ts";
import { makeTree } from "../fixture/mod.ts";
import { startSupervisor } from "../../src/host/supervisor.ts";

const root = Deno.uid() === 0;

Deno.test({
  name:
    "an instance's status reports: the host writes status and the receipt's pid before it acknowledges each, takes only ready/busy from it, and says idle after the stop",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    const mark = `${f.dir}/mark`;
    // A stand-in for `cortexfsd instance` (argv: NAME --root R ...): reports, and after each
    // acknowledgement records what the projections say; then says ready and sleeps in place.
    const script = `read line; [ "$line" = go ] || exit 0
d="$3/agent/$1.d"
for w in ready busy idle; do
  echo "status $w"; read ack
  echo "$ack $(cat "$d/status") $(cat "$d/pid")" >> '${mark}'
done
echo ready
exec sleep 600`;
    const sup = await startSupervisor({
      root: f.root,
      run: f.run,
      command: ["/bin/sh", "-c", script, "standin"],
      graceMs: 5000,
    });
    try {
      const { receipt } = await sup.start("coder");
      const pid = receipt.pid;
      assertEquals(
        Deno.readTextFileSync(mark),
        `ok ready ${pid}\nok busy ${pid}\nok busy ${pid}\n`,
      );
      const d = `${f.root}/agent/coder.d`;
      assertEquals(sup.status("coder").state, "busy");
      const stopped = await sup.stop("coder");
      assertEquals(stopped.result, "exited");
      assertEquals(
        [Deno.readTextFileSync(`${d}/status`), Deno.readTextFileSync(`${d}/pid`)],
        ["idle\n", ""],
      );
    } finally {
      await sup.close();
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "an instance that cannot even be spawned: the waiting client gets one EIO frame, the agent reads dead, and the socket is armed again (a later start succeeds)",
  ignore: !root,
  async fn() {
    const f = await makeTree();
    // An environment Deno.Command refuses (a NUL in a value): the spawn itself throws, before any
    // process exists. The supervisor reads it at each spawn, so taking the bad entry out repairs it.
    const env: Record<string, string> = { PATH: "/usr/bin:/bin", BAD: "a\0b" };
    const sup = await startSupervisor({
      root: f.root,
      run: f.run,
      command: [
        "/bin/sh",
        "-c",
        'read line; [ "$line" = go ] || exit 0; echo ready; exec sleep 600',
        "s",
      ],
      graceMs: 5000,
      env,
    });
    try {
      const sock = `${f.run}/agent/coder.sock`;
      const conn = await Deno.connect({ transport: "unix", path: sock });
      const buf = new Uint8Array(4096);
      // The activator's start fails and the client is told. (Before, the socket stayed disarmed
      // and nothing answered: the bound turns that hang into a failure.)
      let timer: ReturnType<typeof setTimeout> | undefined;
      const n = await Promise.race([
        conn.read(buf),
        new Promise<never>((_, no) =>
          timer = setTimeout(() => no(new Error("no frame: nobody answers the socket")), 30_000)
        ),
      ]).finally(() => clearTimeout(timer));
      const text = new TextDecoder().decode(buf.subarray(0, n ?? 0));
      conn.close();
      const frame = JSON.parse(text.trim());
      assertEquals([frame.type, frame.code], ["error", "EIO"]);
      assertEquals(frame.message.startsWith("agent coder: its instance could not start:"), true);
      assertEquals(Deno.readTextFileSync(`${f.root}/agent/coder.d/status`), "dead\n");
      delete env.BAD;
      const { receipt, already } = await sup.start("coder");
      assertEquals([already, receipt.agent], [false, "coder"]);
    } finally {
      await sup.close();
      await Deno.remove(f.dir, { recursive: true });
    }
  },
});
