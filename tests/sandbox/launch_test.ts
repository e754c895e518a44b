/** Real bwrap launches: the fd hygiene, the --block-fd receipt gate, doctor. */
import net from "node:net";
import { assert, assertEquals } from "../assert.ts";
import {
  doctor,
  gate,
  launch,
  openDir,
  type Receipt,
  receiptLive,
  startTime,
} from "../../src/sandbox/mod.ts";
import { gateFds, inheriting, spawnSandbox } from "../../src/sandbox/launch.ts";
import { close, F, fcntl } from "../../src/sys/libc.ts";
import { sandboxDirs, sandboxSpec } from "../fixture/sandbox.ts";

Deno.test("launch() passes no fd above 2 into the sandbox, even a leaked non-CLOEXEC listener", async () => {
  const base = await sandboxDirs();
  // Deno's node:net Unix listener is created without close-on-exec (platform-notes).
  const server = net.createServer();
  await new Promise<void>((ok) => server.listen(`${base}/leak.sock`, ok));
  const file = Deno.openSync(`${base}/ctx/open-file`, { write: true, create: true });
  try {
    const r = await launch(sandboxSpec(base, ["/bin/bash", "-c", "ls /proc/$$/fd; true"]));
    assertEquals(new TextDecoder().decode(r.stdout), "0\n1\n2\n");
    assertEquals(r.code, 0);
  } finally {
    file.close();
    await new Promise((ok) => server.close(ok));
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("launch() records the sandbox init's pid and start time before the command runs", async () => {
  const base = await sandboxDirs();
  try {
    let seen: { receipt: Receipt; ranEarly: boolean; live: boolean } | undefined;
    const r = await launch(sandboxSpec(base, ["/bin/bash", "-c", "echo ran > /workspace/ran"]), {
      onReceipt(receipt) {
        let ranEarly = true;
        try {
          Deno.statSync(`${base}/ws/ran`);
        } catch {
          ranEarly = false;
        }
        seen = { receipt, ranEarly, live: startTime(receipt.pid) === receipt.start };
      },
    });
    assert(seen);
    assertEquals([seen.ranEarly, seen.live], [false, true]);
    assertEquals(r.receipt, seen.receipt);
    assert(r.receipt.pid !== r.receipt.launcher);
    assertEquals(Deno.readTextFileSync(`${base}/ws/ran`), "ran\n");
    assertEquals(receiptLive(r.receipt), false); // the namespace is gone
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("launch() passes the command's exit code and kills the namespace on abort", async () => {
  const base = await sandboxDirs();
  try {
    assertEquals((await launch(sandboxSpec(base, ["/bin/bash", "-c", "exit 7"]))).code, 7);
    const ac = new AbortController();
    let receipt: Receipt | undefined;
    const p = launch(sandboxSpec(base, ["/bin/sleep", "30"]), {
      signal: ac.signal,
      onReceipt(r) {
        receipt = r;
        setTimeout(() => ac.abort(), 50);
      },
    });
    const err = await p.then(() => null, (e) => e);
    assertEquals(err?.errno, "ECANCELED");
    assert(receipt && !receiptLive(receipt));
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("doctor() reports that bubblewrap can create user and pid namespaces here", async () => {
  const r = await doctor();
  assertEquals({ ok: r.ok, userns: r.userns, pidns: r.pidns }, {
    ok: true,
    userns: true,
    pidns: true,
  });
  assert(r.bwrap?.startsWith("bubblewrap "));
});

Deno.test("the gate stops when a descriptor it hands over is not open: exit 126, the command never runs", async () => {
  // fd 9999 is not open here: nothing was inherited at that number.
  const out = await new Deno.Command("/bin/bash", {
    args: ["-c", gate([9999]), "cortexfs-gate", "echo", "ran"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assertEquals([out.code, new TextDecoder().decode(out.stdout)], [126, ""], err);
  assert(err.includes("9999: Bad file descriptor"), err);
  // Only fds above stdio, never a number that is not one.
  for (const bad of [0, 2, -1, 5.5, NaN]) {
    assertEquals(errnoOf(() => gate([bad])), "EINVAL", String(bad));
  }
});

Deno.test("the gate keeps the fds it hands over at their own numbers (3 and 4 too: info and block go to the next free) and closes every other", async () => {
  const base = await sandboxDirs();
  try {
    assertEquals(gateFds([4, 3]), { info: 5, block: 6 });
    assertEquals(gateFds([]), { info: 3, block: 4 });
    // The outer bash leaves ws at fd 4, home at fd 3 and a stray fd 8 inheritable, then execs
    // the gate for [4, 3].
    const out = await new Deno.Command("/bin/bash", {
      args: [
        "-c",
        `exec 4<"$1/ws" 3<"$1/home" 8<"$1/ctx"; shift; exec "$@"`,
        "outer",
        base,
        "/bin/bash",
        "-c",
        gate([4, 3]),
        "cortexfs-gate",
        "/bin/bash",
        "-c",
        "readlink /proc/$$/fd/4; readlink /proc/$$/fd/3; ls /proc/$$/fd; true",
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assertEquals(
      [out.code, new TextDecoder().decode(out.stdout)],
      [0, `${base}/ws\n${base}/home\n0\n1\n2\n3\n4\n5\n6\n`],
      err,
    );
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});

/** The errno of what `f` throws. */
function errnoOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return (e as { errno?: string }).errno;
  }
  return undefined;
}

/** True when `fd` of this process is close-on-exec (its fdinfo flags, octal, have O_CLOEXEC). */
function cloexec(fd: number): boolean {
  const flags = /^flags:\s*([0-7]+)$/m.exec(Deno.readTextFileSync(`/proc/self/fdinfo/${fd}`));
  assert(flags, `no flags for fd ${fd}`);
  const byFcntl = fcntl(fd, F.GETFD) === F.FD_CLOEXEC;
  const byInfo = (parseInt(flags[1], 8) & 0o2000000) !== 0;
  assertEquals(byFcntl, byInfo, `fd ${fd}`);
  return byInfo;
}

Deno.test("a workspace fd and a protect fd reach bwrap (a 0700 directory of another uid) and nothing of them the command: ls /proc/self/fd sees 0-2 and its own", async () => {
  const base = await sandboxDirs();
  // A directory only its owner may read, as a user's cwd often is.
  Deno.chmodSync(`${base}/ws`, 0o700);
  Deno.chownSync(`${base}/ws`, 65534, 65534);
  Deno.mkdirSync(`${base}/ws/.git`);
  Deno.chownSync(`${base}/ws/.git`, 65534, 65534);
  const server = net.createServer(); // a leaked non-close-on-exec fd beside the passed ones
  await new Promise<void>((ok) => server.listen(`${base}/leak.sock`, ok));
  const ws = openDir(`${base}/ws`), git = openDir(`${base}/ws/.git`);
  try {
    const r = await launch({
      ...sandboxSpec(base, [
        "/bin/bash",
        "-c",
        "ls /proc/self/fd; ls -a /workspace; touch /workspace/new; touch /workspace/.git/x || echo ro; ls /workspace",
      ]),
      uid: 65534,
      gid: 65534,
      workspace: { fd: ws },
      protect: [{ fd: git, dst: "/workspace/.git" }],
    });
    assertEquals(
      [r.code, new TextDecoder().decode(r.stdout)],
      [0, "0\n1\n2\n3\n.\n..\n.git\nro\nnew\n"],
      new TextDecoder().decode(r.stderr),
    );
    assertEquals([cloexec(ws), cloexec(git)], [true, true]); // and no other spawn gets them
  } finally {
    close(ws);
    close(git);
    await new Promise((ok) => server.close(ok));
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("inheriting(): the fds are inheritable during the spawn only, close-on-exec again after it, a failed one too", async () => {
  const base = await sandboxDirs();
  const a = openDir(`${base}/ws`), b = openDir(`${base}/home`);
  try {
    assertEquals([cloexec(a), cloexec(b)], [true, true]);
    // During the call: inheritable, and a child sees them at their numbers.
    const child = inheriting([a, b], () => {
      assertEquals([cloexec(a), cloexec(b)], [false, false]);
      return new Deno.Command("/bin/sh", {
        args: ["-c", `readlink /proc/self/fd/${a} /proc/self/fd/${b}`],
        stdout: "piped",
      }).spawn();
    });
    assertEquals([cloexec(a), cloexec(b)], [true, true]);
    const out = await child.output();
    assertEquals(new TextDecoder().decode(out.stdout), `${base}/ws\n${base}/home\n`);
    // A spawn that fails (no such program).
    let threw = false;
    try {
      inheriting([a, b], () => new Deno.Command(`${base}/none`).spawn());
    } catch (e) {
      threw = e instanceof Deno.errors.NotFound;
    }
    assert(threw);
    assertEquals([cloexec(a), cloexec(b)], [true, true]);
    // An fd that is not open stops it before the spawn; those cleared before are set again.
    let spawned = false;
    assertEquals(errnoOf(() => inheriting([a, 9999, b], () => spawned = true)), "EBADF");
    assertEquals([spawned, cloexec(a), cloexec(b)], [false, true, true]);
    // launch() with a protect fd that is not open: EBADF, the workspace fd close-on-exec again.
    const err = await launch({
      ...sandboxSpec(base, ["/bin/true"]),
      workspace: { fd: a },
      protect: [{ fd: 9999, dst: "/workspace/.git" }],
    }).then(() => null, (e) => e);
    assertEquals([err?.errno, cloexec(a)], ["EBADF", true]);
  } finally {
    close(a);
    close(b);
    await Deno.remove(base, { recursive: true });
  }
});

Deno.test("spawnSandbox() (an executable agent's step) binds a workspace fd the same way: the command sees fds 0-2 and its own, the host's fd is close-on-exec again", async () => {
  const base = await sandboxDirs();
  Deno.chmodSync(`${base}/ws`, 0o700);
  Deno.chownSync(`${base}/ws`, 65534, 65534);
  Deno.writeTextFileSync(`${base}/ws/seen`, "here\n");
  const ws = openDir(`${base}/ws`);
  try {
    const sbx = spawnSandbox({
      ...sandboxSpec(base, ["/bin/bash", "-c", "ls /proc/self/fd; cat /workspace/seen"]),
      uid: 65534,
      gid: 65534,
      workspace: { fd: ws },
    }, { stderr: "piped" });
    assert(cloexec(ws));
    await sbx.child.stdin.close();
    const out = await sbx.child.output();
    sbx.cleanup();
    assertEquals(
      [out.code, new TextDecoder().decode(out.stdout)],
      [0, "0\n1\n2\n3\nhere\n"],
      new TextDecoder().decode(out.stderr),
    );
  } finally {
    close(ws);
    await Deno.remove(base, { recursive: true });
  }
});
