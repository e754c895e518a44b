/** End to end: a real cortexfsd on a temp mount, driven with real tools (bash, printf, cp, sed, tee). */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { mountedType } from "../../src/fuse/mount.ts";
import { BINARIES } from "../../src/fuse/launcher.ts";
import {
  cleanup,
  CTX,
  type Daemon,
  DENO,
  makeTree,
  REPO,
  sh,
  startDaemon,
  until,
} from "../fixture/mod.ts";

const read = (p: string) => Deno.readTextFileSync(p);

Deno.test("the root is frozen: exactly the seven names; creating anything else fails EACCES", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const m = tree.mount;
    assertEquals(
      [...Deno.readDirSync(m)].map((e) => e.name).sort(),
      ["agent", "bin", "home", "model", "shared", "status", "tool"],
    );
    const r = await sh(
      `cd ${m}; for c in 'mkdir skill' 'touch memo' 'ln -s x mcp' 'mv home h2' 'rmdir shared'; do
         $c 2>/dev/null; echo "$c=$?"; done`,
    );
    assertEquals(
      r.stdout,
      "mkdir skill=1\ntouch memo=1\nln -s x mcp=1\nmv home h2=1\nrmdir shared=1\n",
    );
    const e = await sh(`mkdir ${m}/skill`);
    assertMatch(e.stderr, /Permission denied/);
    assertEquals(
      [...Deno.readDirSync(m)].map((e) => e.name).sort(),
      ["agent", "bin", "home", "model", "shared", "status", "tool"],
    );
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("status is dynamic JSON and read-only (EROFS even for root); bin/ has a launcher for each binary that can start", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const st = JSON.parse(read(`${tree.mount}/status`));
    assertEquals(
      { ...st, pid: 0, uptime_s: 0, serving: { ...st.serving, policy: "SCHED_RR", drops: 0 } },
      {
        schema: "cortexfs.status/v1",
        state: "online",
        generation: 1,
        tree_version: st.tree_version,
        storage: tree.storage,
        mount: tree.mount,
        pid: 0,
        uptime_s: 0,
        serving: { policy: "SCHED_RR", priority: 1, drops: 0 }, // cortexfsd's default
        agents: [{ name: "coder", state: "idle", pid: null }], // socket armed, no instance yet
      },
    );
    assertEquals(typeof st.tree_version, "number");
    // The thread may have dropped to the ordinary policy for a while meanwhile (a loaded machine):
    // sched_test holds what drops it; here only that status says it.
    assert(["SCHED_RR", "ordinary"].includes(st.serving.policy), JSON.stringify(st.serving));
    assert(Number.isInteger(st.serving.drops) && st.serving.drops >= 0, JSON.stringify(st.serving));
    const w = await sh(`echo x > ${tree.mount}/status`);
    assertEquals([w.code, /Read-only file system/.test(w.stderr)], [1, true]);
    const lim = await sh(`echo 5 > ${tree.mount}/model/debug/echo.d/limit`);
    assertEquals([lim.code, /Read-only file system/.test(lim.stderr)], [1, true]);
    assertEquals(read(`${tree.mount}/model/debug/echo.d/limit`), "131072\n");
    // a launcher is projected only when its binary can start (dist/bin/<name> or cli/<name>.ts)
    const startable = BINARIES.filter((b) =>
      [`${REPO}/dist/bin/${b}`, `${REPO}/cli/${b}.ts`].some((f) => {
        try {
          return Deno.statSync(f).isFile;
        } catch {
          return false;
        }
      })
    );
    const bins = [...Deno.readDirSync(`${tree.mount}/bin`)].map((e) => e.name).sort();
    assertEquals(bins, ["cortexfs.bootstrap.json", ...startable].sort());
    for (const b of startable) {
      const r = await sh(`${tree.mount}/bin/${b} --help`);
      assertEquals([b, r.code], [b, 0], r.stderr);
    }
    assertMatch(
      read(`${tree.mount}/bin/ctx`),
      /^#!\/bin\/sh\nexec .*cli\/ctx\.ts" "\$@"\n$|^#!\/bin\/sh\nexec .*ctx.* "\$@"\n$/,
    );
    assertEquals(Deno.lstatSync(`${tree.mount}/bin/tsh`).mode! & 0o777, 0o555);
    assertEquals(
      Deno.readLinkSync(`${tree.mount}/agent/coder.sock`),
      `${tree.run}/agent/coder.sock`,
    );
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("every write path reaches validation: valid values land, invalid ones fail and keep the bytes", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const w = `${tree.mount}/agent/coder.d/window`;
    const backing = `${tree.root}/agent/coder.d/window`;
    const cases: [string, number, string][] = [
      // [script, exit code, window bytes afterwards]
      [`echo 1000 > ${w}`, 0, "1000\n"],
      [`echo 01 > ${w}`, 1, "1000\n"],
      [`printf '2048\\n' > ${w}`, 0, "2048\n"],
      [`printf 2049 > ${w}`, 1, "2048\n"], // no final newline: not one LF-terminated line
      [`printf '300\\n' > /tmp/.w$$ && cp /tmp/.w$$ ${w}; r=$?; rm /tmp/.w$$; exit $r`, 0, "300\n"],
      [`printf '0\\n' > /tmp/.w$$ && cp /tmp/.w$$ ${w}; r=$?; rm /tmp/.w$$; exit $r`, 1, "300\n"],
      [`sed -i 's/300/4096/' ${w}`, 0, "4096\n"],
      [`sed -i 's/4096/999999999/' ${w}`, 4, "4096\n"], // over the model's limit 131072
      [`echo auto | tee ${w} >/dev/null`, 0, "auto\n"],
      [`echo 12x | tee ${w} >/dev/null`, 1, "auto\n"],
      [`echo 131072 > ${w}`, 0, "131072\n"],
      [`head -c 70000 /dev/zero | tr '\\0' 'a' > ${w}`, 1, "131072\n"], // first 8 KiB chunk: EINVAL
      [`echo 5 >> ${w}`, 1, "131072\n"], // appended content ends a line: judged at write(2)
      [`truncate -s 0 ${w}`, 1, "131072\n"], // judged at close(2), which truncate checks
      [`head -c 70000 /dev/zero | dd of=${w} bs=70000 iflag=fullblock status=none`, 1, "131072\n"],
    ];
    for (const [script, code, after] of cases) {
      const r = await sh(script);
      assertEquals(
        [script, r.code, read(w), read(backing)],
        [script, code, after, after],
        r.stderr,
      );
    }
    const big = await sh(
      `head -c 70000 /dev/zero | dd of=${w} bs=70000 iflag=fullblock status=none`,
    );
    assertMatch(big.stderr, /Message too long/);
    const bad = await sh(`echo 01 > ${w}`);
    assertMatch(bad.stderr, /Invalid argument/);
    // model changes check the window invariant too: 131072 does not fit a model of unknown limit
    const m = await sh(`echo other/none > ${tree.mount}/agent/coder.d/model`);
    assertEquals([m.code, read(`${tree.mount}/agent/coder.d/model`)], [1, "debug/echo\n"]);
    // unknown names in a .d/ are refused; temp names live in memory and never reach the tree
    const u = await sh(`echo x > ${tree.mount}/agent/coder.d/bogus`);
    assertEquals([u.code, /Invalid argument/.test(u.stderr)], [1, true]);
    assertEquals((await sh(`echo x > ${tree.mount}/agent/coder.d/.scratch`)).code, 0);
    assertEquals(read(`${tree.mount}/agent/coder.d/.scratch`), "x\n");
    let onDisk = true;
    try {
      Deno.statSync(`${tree.root}/agent/coder.d/.scratch`);
    } catch {
      onDisk = false;
    }
    assertEquals(onDisk, false);
    // appends to a list control: valid lines land, an invalid one fails the write
    const p = `${tree.mount}/agent/coder.d/policy`;
    const before = read(p);
    assertEquals((await sh(`echo 'allow coder_t model:debug/echo use' >> ${p}`)).code, 0);
    assertEquals(read(p), before + "allow coder_t model:debug/echo use\n");
    const g = await sh(`echo 'garbage line' >> ${p}`);
    assertEquals([g.code, /Invalid argument/.test(g.stderr), read(p)], [
      1,
      true,
      before + "allow coder_t model:debug/echo use\n",
    ]);
    // read-only projections of the agent (served, no instance yet: idle)
    assertEquals((await sh(`echo busy > ${tree.mount}/agent/coder.d/status`)).code, 1);
    assertEquals(read(`${tree.mount}/agent/coder.d/status`), "idle\n");
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("ownership: only the agent owner (or root) changes controls; files are created as the caller", async () => {
  const tree = await makeTree({ uid: 65534, gid: 65534 });
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const m = tree.mount;
    const w = `${m}/agent/coder.d/window`;
    assertEquals(Deno.statSync(w).uid, 65534);
    const other = await sh(`echo 100 > ${w}`, { uid: 65533 });
    assertEquals([other.code, /Permission denied/.test(other.stderr), read(w)], [
      1,
      true,
      "auto\n",
    ]);
    const owner = await sh(`echo 100 > ${w} && sed -i s/100/200/ ${w}`, { uid: 65534 });
    assertEquals([owner.code, read(w)], [0, "200\n"], owner.stderr);
    const home = `${m}/home/65534`;
    const r = await sh(
      `cd ${home} && echo hi > f && mkdir d && ln -s f l && chmod 600 f && stat -c '%n %u %g %a %s %h' f d l`,
      { uid: 65534 },
    );
    assertEquals(
      r.stdout,
      "f 65534 65534 600 3 1\nd 65534 65534 755 4096 2\nl 65534 65534 777 1 1\n",
      r.stderr,
    );
    const st = Deno.lstatSync(`${tree.root}/home/65534/f`);
    assertEquals([st.uid, st.gid, st.mode! & 0o777], [65534, 65534, 0o600]);
    const peek = await sh(`cat ${home}/f`, { uid: 65533 });
    assertEquals([peek.code, /Permission denied/.test(peek.stderr)], [1, true]);
    const session = `${home}/agent/coder`;
    assertEquals(Deno.statSync(session).mode! & 0o777, 0o700);
    assertEquals((await sh(`ls ${session}`, { uid: 65533 })).code, 2);
    const chown = await sh(`chown 0 ${home}/f`, { uid: 65534 });
    assertEquals(chown.code, 1);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: SIGTERM unmounts and exits 0; a second daemon refuses a live mount", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const second = await startDaemon(tree, { wait: false });
    assertEquals((await second.child.status).code, 69);
    await second.stop();
    assertMatch(second.log(), /EBUSY: .*live fuse.cortexfs mount is already there/);
    const code = await d.stop();
    d = null;
    assertEquals([code, mountedType(tree.mount)], [0, null]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: an external unmount ends the daemon cleanly (exit 0)", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const u = await sh(`fusermount3 -u ${tree.mount}`);
    assertEquals(u.code, 0, u.stderr);
    const code = await d.child.status;
    assertEquals([code.code, mountedType(tree.mount)], [0, null]);
    await d.stop();
    d = null;
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: kill -9 of a mount(2) daemon leaves a dead mount; the next start clears it", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    d.child.kill("SIGKILL");
    await d.stop();
    const dead = await sh(`stat ${tree.mount}`);
    assertMatch(dead.stderr, /Transport endpoint is not connected/);
    d = await startDaemon(tree);
    assertMatch(d.log(), /cleared a dead mount/);
    assertEquals(read(`${tree.mount}/agent/coder.d/window`), "auto\n");
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: --dev too clears the dead mount kill -9 left, and says so", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    // --dev with explicit paths: the development code path (it creates the mount point and
    // updates the storage itself) on a temp tree instead of the checkout's .dev/.
    d = await startDaemon(tree, { args: ["--dev"] });
    d.child.kill("SIGKILL");
    await d.stop();
    d = null;
    assertMatch((await sh(`stat ${tree.mount}`)).stderr, /Transport endpoint is not connected/);
    d = await startDaemon(tree, { args: ["--dev"] });
    assertMatch(d.log(), /cleared a dead mount left at .* by a killed daemon/);
    assertEquals(read(`${tree.mount}/agent/coder.d/window`), "auto\n");
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: a restart at once after kill -9 clears the dead mount while the kernel still caches the root's attributes", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    // A long attribute timeout: the root's cached attributes outlive the daemon by 30 s, and a
    // stat of the mount point answers from that cache instead of ENOTCONN.
    d = await startDaemon(tree, { args: ["--ttl", "30"] });
    Deno.statSync(tree.mount);
    d.child.kill("SIGKILL");
    await d.stop();
    d = await startDaemon(tree);
    assertMatch(d.log(), /cleared a dead mount/);
    assertEquals(read(`${tree.mount}/agent/coder.d/window`), "auto\n");
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("lifecycle: with fusermount3 (auto_unmount) kill -9 leaves no mount behind", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree, { args: ["--fusermount"] });
    assertMatch(d.log(), /\(fusermount\)/);
    assertEquals(read(`${tree.mount}/agent/coder.d/window`), "auto\n");
    d.child.kill("SIGKILL");
    await d.stop();
    d = null;
    await until(() => mountedType(tree.mount) === null, "auto_unmount");
    assert(mountedType(tree.mount) === null);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("ctx gives the same results through the mount as on the storage tree", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const cmds = [
      "cat agent/coder.d/window",
      "set agent/coder.d/window 4096",
      "set agent/coder.d/window 01",
      "set model/debug/echo.d/limit 5",
      "set agent/coder.d/bogus x",
      "cat agent/coder.d/window",
      "set agent/coder.d/window auto",
      "cat agent/coder.d/window",
    ];
    const results: Record<string, string[]> = {};
    for (const root of [tree.mount, tree.root]) {
      results[root === tree.mount ? "mount" : "tree"] = [];
      for (const c of cmds) {
        const r = await sh(`${DENO} run -A ${CTX} -r ${root} ${c}`);
        results[root === tree.mount ? "mount" : "tree"].push(
          `${c} => ${r.code} ${r.stdout}${r.stderr}`,
        );
      }
    }
    assertEquals(results.mount, results.tree);
    assertMatch(results.mount[2], /=> 2 .*EINVAL/);
    assertMatch(results.mount[3], /=> 1 .*EROFS/);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("home passthrough: sizes, times, links, truncate, EXDEV into the projection, statfs", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const h = `${tree.mount}/home/0`;
    const r = await sh(
      `cd ${h} && printf 0123456789 > f && truncate -s 4 f && ln f g && touch -d @1000000000 f &&
       printf ab | dd of=f bs=1 seek=8 conv=notrunc status=none &&
       stat -c '%s %h %Y' f g && mkdir -p a/b && mv a c && ls c && cat f | od -An -c | tr -s ' ' &&
       (mv f ${tree.mount}/agent/coder.d/window 2>&1; echo "mv=$?") && df -P . | tail -1 | awk '{print ($2 > 0)}'`,
    );
    const mtime = Deno.statSync(`${tree.root}/home/0/f`).mtime!.getTime() / 1000;
    assertEquals(r.stdout.split("\n").slice(0, 4), [
      `10 2 ${Math.floor(mtime)}`,
      `10 2 ${Math.floor(mtime)}`,
      "b",
      " 0 1 2 3 \\0 \\0 \\0 \\0 a b",
    ]);
    // EXDEV makes mv copy, and mv first removes the target: controls cannot be removed (EROFS)
    assertMatch(r.stdout, /inter-device move failed[^\n]*Read-only file system\nmv=1\n1\n$/);
    assertEquals(read(`${tree.mount}/agent/coder.d/window`), "auto\n");
  } finally {
    await cleanup(tree, d);
  }
});
