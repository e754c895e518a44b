/** profile() is a pure transform: whole-argv assertions with a fixed host layout. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { profile, type SandboxSpec } from "./profile.ts";

const layout = { links: { bin: "usr/bin" }, dirs: ["usr"], etc: ["hosts", "resolv.conf"] };
const spec: SandboxSpec = {
  ctx: "/s/current",
  workspace: { fd: 17 },
  home: "/s/current/home/0/agent/coder",
  uid: 1000,
  gid: 1000,
  groups: [1000, 27],
  network: false,
  env: { HOME: "/home/agent" },
  protect: [{ fd: 18, dst: "/workspace/.git" }, { fd: 19, dst: "/workspace/lib/.git" }],
  masks: ["/home/agent/session"],
  command: ["/bin/true"],
};

Deno.test("profile() builds the whole bwrap argv: namespaces, read-only system, /ctx ro, workspace and .git by fd, masks, empty env", () => {
  const p = profile(spec, { dataDir: "/d", layout });
  assertEquals(p.args, [
    "--unshare-all",
    "--unshare-user",
    "--die-with-parent",
    "--new-session",
    "--uid",
    "1000",
    "--gid",
    "1000",
    "--hostname",
    "cortexfs",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--ro-bind",
    "/etc/hosts",
    "/etc/hosts",
    "--ro-bind",
    "/d/passwd",
    "/etc/passwd",
    "--ro-bind",
    "/d/group",
    "/etc/group",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--size",
    String(64 << 20),
    "--tmpfs",
    "/dev/shm",
    "--remount-ro",
    "/dev",
    "--size",
    String(512 << 20),
    "--tmpfs",
    "/tmp",
    "--size",
    String(16 << 20),
    "--tmpfs",
    "/run",
    "--ro-bind",
    "/s/current",
    "/ctx",
    "--bind",
    "/s/current/home/0/agent/coder",
    "/home/agent",
    "--bind-fd",
    "17",
    "/workspace",
    "--ro-bind-fd",
    "18",
    "/workspace/.git",
    "--ro-bind-fd",
    "19",
    "/workspace/lib/.git",
    "--tmpfs",
    "/home/agent/session",
    "--remount-ro",
    "/home/agent/session",
    "--chdir",
    "/workspace",
    "--cap-drop",
    "ALL",
    "--clearenv",
  ]); // deno-fmt-ignore
  // The environment is never on the argv (an agent's env holds secrets): the launcher hands
  // these words to bwrap through an fd (--args).
  assertEquals(p.env, ["--setenv", "HOME", "/home/agent"]);
  assertEquals(p.data, {
    passwd: "agent:x:1000:1000:CortexFS agent:/home/agent:/bin/bash\n" +
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    group: "agent:x:1000:\ng27:x:27:agent\nnogroup:x:65534:\n",
  });
  // The host fds, named by their own numbers: 17 is the workspace, 18 and 19 the protected .git
  // entries (the launcher's spawn passes them at these numbers).
  assertEquals(p.fds, [17, 18, 19]);
});

Deno.test("profile() shares the network (and resolv.conf) only when granted", () => {
  const p = profile({ ...spec, network: true }, { dataDir: "/d", layout });
  assertEquals(p.args.slice(0, 3), ["--unshare-all", "--unshare-user", "--share-net"]);
  assertEquals(p.args.includes("/etc/resolv.conf"), true);
});

Deno.test("profile() fails closed on paths and variables it cannot express", () => {
  const e = assertThrows(
    () => profile({ ...spec, workspace: "w" }, { dataDir: "/d", layout }),
    CtxError,
  );
  assertEquals([e.errno, e.message], [
    "EINVAL",
    'sandbox workspace must be an absolute path without "..": "w"',
  ]);
  const v = assertThrows(
    () => profile({ ...spec, env: { "A-B": "x" } }, { dataDir: "/d", layout }),
    CtxError,
  );
  assertEquals(v.errno, "EINVAL");
});

Deno.test("profile() runs the command under its limits, set inside the sandbox: defaults, or lower", () => {
  const wrap = (nproc: number, cpu: number) => [
    "/usr/bin/prlimit",
    `--nproc=${nproc}`,
    "--data=2147483648",
    `--cpu=${cpu}`,
    "--nofile=1024",
    "--",
    "/bin/true",
  ];
  assertEquals(profile(spec, { dataDir: "/d", layout }).command, wrap(256, 120));
  assertEquals(
    profile({ ...spec, rlimit: { nproc: 8, cpu: 5 } }, { dataDir: "/d", layout }).command,
    wrap(8, 5),
  );
  // tsh's sandbox: headroom for tsh's own threads above the nproc its tools get (tsh --nproc).
  assertEquals(
    profile({ ...spec, rlimit: { nproc: 8, cpu: 5 }, nprocHeadroom: 64 }, {
      dataDir: "/d",
      layout,
    }).command,
    wrap(72, 5),
  );
});
