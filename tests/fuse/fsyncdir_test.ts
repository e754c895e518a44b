/** fsync(2) of a directory in home/ reaches the backing directory: seen with strace on the daemon. */
import { assert, assertEquals } from "../assert.ts";
import { PYTHON, sh, UIDS, until, withMount } from "../fixture/mod.ts";

const SCRIPT = `
import os, sys
d = sys.argv[1]
with open(d + "/f.tmp", "w") as f:
    f.write("data"); f.flush(); os.fsync(f.fileno())
os.rename(d + "/f.tmp", d + "/f")
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.close(fd)
print("synced")
`;

/** Collects a stream into `text` until it ends. */
function collect(stream: ReadableStream<Uint8Array>, into: { text: string }): Promise<void> {
  const dec = new TextDecoder();
  return (async () => {
    for await (const c of stream) into.text += dec.decode(c);
  })();
}

Deno.test({
  name:
    "fsync of a home directory fsyncs the backing directory (tmp + rename + fsync(dir)), root and uid 1000",
  ignore: PYTHON === null,
  fn: () =>
    withMount(async ({ tree, daemon, home }) => {
      for (const uid of UIDS) {
        const h = await home(uid);
        assertEquals((await sh(`mkdir ${h}/d`, { uid })).code, 0);
        const backing = `${tree.root}/home/${uid}/d`;
        const strace = new Deno.Command("strace", {
          args: ["-f", "-y", "-e", "trace=fsync,fdatasync", "-p", String(daemon.child.pid)],
          stdin: "null",
          stdout: "null",
          stderr: "piped",
        }).spawn();
        const log = { text: "" };
        const done = collect(strace.stderr, log);
        try {
          await until(() => /attached/.test(log.text), "strace to attach");
          const r = await sh(`${PYTHON} -c '${SCRIPT}' ${h}/d`, { uid });
          assertEquals([r.code, r.stdout], [0, "synced\n"], r.stderr);
          await until(
            () => log.text.includes(`fsync(`) && log.text.includes(`<${backing}>) = 0`),
            `an fsync of ${backing} in the daemon:\n${log.text}`,
          );
        } finally {
          strace.kill("SIGINT");
          await strace.status;
          await done;
        }
        assert(new RegExp(`fsync\\(\\d+<${backing}>\\) = 0`).test(log.text), log.text);
      }
    }),
});
