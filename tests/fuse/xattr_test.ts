/** Read-only `user.cortexfs.*` xattrs through a real mount, read with getfattr and a raw getxattr(2) client. */
import { assertEquals } from "../assert.ts";
import { cleanup, type Daemon, makeTree, sh, startDaemon } from "../fixture/mod.ts";

const here = new URL(".", import.meta.url).pathname;

/** `getfattr -d -m -` of each path as `{path: {name: value}}` (names without the prefix). */
async function dump(
  mount: string,
  paths: string[],
): Promise<Record<string, Record<string, string>>> {
  const r = await sh(
    `cd ${mount} && getfattr -h -d -m - --absolute-names ${paths.map((p) => `'${p}'`).join(" ")}`,
  );
  assertEquals(r.stderr, "");
  const out: Record<string, Record<string, string>> = {};
  let cur: Record<string, string> = {};
  for (const line of r.stdout.split("\n")) {
    const file = line.match(/^# file: (.*)$/);
    if (file) out[file[1]] = cur = {};
    const kv = line.match(/^user\.cortexfs\.([a-z_]+)="(.*)"$/);
    if (kv) cur[kv[1]] = kv[2];
  }
  return out;
}

const attrs = (
  abi_path: string,
  kind: string,
  o: { virtual?: boolean; backing?: boolean; bytes: number },
) => ({
  abi_path,
  kind,
  origin: o.virtual ? "virtual" : "disk",
  storage: o.virtual ? "memory" : "disk",
  backing_exists: o.backing === false ? "0" : "1",
  bytes: String(o.bytes),
});

Deno.test("xattrs: every node answers user.cortexfs.{abi_path,kind,origin,storage,backing_exists,bytes}", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const m = tree.mount;
    const made = await sh(`mkdir ${m}/home/0/dir && printf 12345 > ${m}/home/0/dir/f`);
    assertEquals(made.code, 0);
    const size = (p: string) => Deno.lstatSync(`${m}/${p}`).size;
    const got = await dump(m, [
      ".",
      "status",
      "bin/ctx",
      "agent",
      "agent/coder",
      "agent/coder.d",
      "agent/coder.d/window",
      "model/debug/echo.d/limit",
    ]);
    assertEquals(got, {
      ".": attrs("/", "root", { virtual: true, bytes: 4096 }),
      "status": attrs("/status", "status", { virtual: true, bytes: size("status") }),
      "bin/ctx": attrs("/bin/ctx", "launcher", {
        virtual: true,
        backing: false,
        bytes: size("bin/ctx"),
      }),
      "agent": attrs("/agent", "dir", { bytes: size("agent") }),
      "agent/coder": attrs("/agent/coder", "object", { bytes: size("agent/coder") }),
      "agent/coder.d": attrs("/agent/coder.d", "cdir", { bytes: size("agent/coder.d") }),
      "agent/coder.d/window": attrs("/agent/coder.d/window", "control", { bytes: 5 }),
      // computed by the daemon (spec/models.md §1); debug/echo also stores a `limit` file
      "model/debug/echo.d/limit": attrs("/model/debug/echo.d/limit", "control", {
        virtual: true,
        bytes: 7,
      }),
    });
    // home/shared list only the backing file's own user.* names (none here); the projection's
    // attributes are still answered by name
    assertEquals(await dump(m, ["home/0/dir", "home/0/dir/f"]), {});
    const named = await sh(
      `cd ${m}/home/0/dir && for n in abi_path kind origin storage backing_exists bytes; do ` +
        `getfattr -n user.cortexfs.$n --only-values f; echo; done`,
    );
    assertEquals(
      Object.values(attrs("/home/0/dir/f", "file", { bytes: 5 })).join("\n") + "\n",
      named.stdout,
    );
    // values follow the file: a control written through the mount reports its new size at once
    assertEquals((await sh(`echo 4096 > ${m}/agent/coder.d/window`)).code, 0);
    const one = await sh(`getfattr -n user.cortexfs.bytes --only-values ${m}/agent/coder.d/window`);
    assertEquals([one.code, one.stdout], [0, "5"]);
    const win = await sh(`getfattr -n user.cortexfs.kind --only-values ${m}/agent/coder.d`);
    assertEquals([win.code, win.stdout], [0, "cdir"]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("xattrs: size probe, ERANGE for a short buffer, ENODATA for unknown names, ENOTSUP outside user.*", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  const probe = `${tree.dir}/probe`;
  try {
    const cc = await sh(`gcc -O2 -o ${probe} ${here}xattr_probe.c`);
    assertEquals([cc.code, cc.stderr], [0, ""]);
    d = await startDaemon(tree);
    const p = `${tree.mount}/agent/coder.d`;
    const list = "user.cortexfs.abi_path,user.cortexfs.kind,user.cortexfs.origin," +
      "user.cortexfs.storage,user.cortexfs.backing_exists,user.cortexfs.bytes,";
    const cases: [string, string, number][] = [
      [p, "user.cortexfs.kind", 0], // size probe: the length only
      [p, "user.cortexfs.kind", 3], // one byte short
      [p, "user.cortexfs.kind", 4], // exact
      [p, "user.cortexfs.abi_path", 64],
      [p, "--list", 0],
      [p, "--list", 10],
      [p, "--list", 4096],
      [p, "user.cortexfs.nope", 64],
      [p, "user.other", 64],
      [p, "security.selinux", 64],
      [p, "system.posix_acl_access", 64],
      [`${tree.mount}/agent/coder.sock`, "--list", 4096], // symlinks carry no user.* attributes
      [`${tree.mount}/agent/nobody`, "user.cortexfs.kind", 64],
    ];
    const r = await sh(cases.map(([f, n, s]) => `${probe} '${f}' '${n}' ${s}`).join("; "));
    assertEquals(r.stdout.split("\n"), [
      "4",
      "-1 ERANGE",
      "4 cdir",
      "14 /agent/coder.d",
      String(list.length),
      "-1 ERANGE",
      `${list.length} ${list}`,
      "-1 ENODATA",
      "-1 ENODATA",
      "-1 ENOTSUP",
      "-1 ENOTSUP",
      "0 ",
      "-1 No such file or directory",
      "",
    ]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("user.cortexfs.* is read-only: setfattr/setfattr -x fail with EROFS in the projection, EPERM in home, ENOTSUP in controls", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const m = tree.mount;
    assertEquals((await sh(`printf x > ${m}/home/0/f`)).code, 0);
    const targets = ["status", "agent/coder", "bin/ctx", "home/0/f", "agent/coder.d/window"];
    const script = targets.map((t) =>
      `setfattr -n user.cortexfs.kind -v x ${m}/${t} 2>&1 | sed 's/.*: //'; ` +
      `setfattr -x user.cortexfs.kind ${m}/${t} 2>&1 | sed 's/.*: //'`
    ).join("; ");
    const r = await sh(script);
    const rofs = "Read-only file system", nosup = "Operation not supported";
    assertEquals(r.stdout.split("\n"), [
      rofs,
      rofs,
      rofs,
      rofs,
      rofs,
      rofs,
      "Operation not permitted", // home/0/f: the name is the projection's
      "Operation not permitted",
      nosup,
      nosup,
      "",
    ]);
    // nothing changed
    const k = await sh(`getfattr -n user.cortexfs.kind --only-values ${m}/home/0/f`);
    assertEquals(k.stdout, "file");
  } finally {
    await cleanup(tree, d);
  }
});
