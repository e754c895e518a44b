import { assertEquals } from "../../tests/assert.ts";
import { close, F, fcntl, O, open } from "../sys/libc.ts";
import { PtyChild } from "./child.ts";

async function run(argv: string[], size = { rows: 7, cols: 33 }, inherit?: number[]) {
  const c = PtyChild.start({ argv, env: { PATH: "/usr/bin:/bin", TERM: "dumb" }, size, inherit });
  let out = "";
  const pumped = c.pump((b) => void (out += new TextDecoder().decode(b)));
  const st = await c.exited;
  await pumped;
  await c.close();
  return { out, st };
}

Deno.test("PtyChild runs a session leader with the PTY as its controlling terminal, sized", async () => {
  const r = await run([
    "/bin/sh",
    "-c",
    'stty size; tty; ps -o sid= -o tpgid= -p $$ | awk \'{print ($1 == $2) ? "leader+fg" : "no"}\'; exit 4',
  ]);
  assertEquals(r.st, { code: 4, signal: null });
  const lines = r.out.split("\r\n").filter((l) => l);
  assertEquals([lines[0], /^\/dev\/pts\/\d+$/.test(lines[1]), lines[2]], [
    "7 33",
    true,
    "leader+fg",
  ]);
});

Deno.test("PtyChild reports a signal death as 128+n and resets inherited dispositions (SIGPIPE kills)", async () => {
  const r = await run(["/bin/sh", "-c", "kill -TERM $$"]);
  assertEquals(r.st, { code: 143, signal: 15 });
  // Deno ignores SIGPIPE; a child must get the default back: `yes | head` ends by SIGPIPE.
  const p = await run(["/bin/bash", "-c", "yes | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}"]);
  assertEquals(p.out.trim(), "141");
});

Deno.test("PtyChild.resize reaches the program as SIGWINCH", async () => {
  const c = PtyChild.start({
    argv: [
      "/bin/bash",
      "-c",
      "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done",
    ],
    env: { PATH: "/usr/bin:/bin" },
    size: { rows: 24, cols: 80 },
  });
  let out = "";
  let resized = false;
  const pumped = c.pump((b) => {
    out += new TextDecoder().decode(b);
    if (!resized && out.includes("ready")) {
      resized = true;
      c.resize({ rows: 50, cols: 132 });
    }
  });
  assertEquals(await c.exited, { code: 0, signal: null });
  await pumped;
  await c.close();
  assertEquals(out.includes("50 132"), true, out);
});

Deno.test("PtyChild passes the fds asked for at their own numbers (close-on-exec here, before and after), no other", async () => {
  const enc = new TextEncoder();
  const a = open(enc.encode("/tmp\0"), O.PATH | O.DIRECTORY);
  const b = open(enc.encode("/etc\0"), O.PATH | O.DIRECTORY);
  const other = open(enc.encode("/usr\0"), O.PATH | O.DIRECTORY);
  try {
    fcntl(other, F.SETFD, 0); // even one that is not close-on-exec stays here
    const r = await run(
      ["/bin/bash", "-c", `readlink /proc/$$/fd/${a} /proc/$$/fd/${b}; ls -1 /proc/$$/fd; true`],
      undefined,
      [a, b],
    );
    assertEquals(r.out.split("\r\n").filter((l) => l), [
      "/tmp",
      "/etc",
      ...["0", "1", "2", String(a), String(b)].sort(),
    ]);
    // posix_spawn cleared close-on-exec in the child only.
    assertEquals([fcntl(a, F.GETFD), fcntl(b, F.GETFD)], [F.FD_CLOEXEC, F.FD_CLOEXEC]);
  } finally {
    for (const fd of [a, b, other]) close(fd);
  }
});
