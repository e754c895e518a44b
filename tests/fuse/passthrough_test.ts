/** FUSE passthrough: plain home/shared files do their I/O in the kernel and behave as on the backing dir; controls and set-id files stay served. */
import { assert, assertEquals } from "../assert.ts";
import {
  cleanup,
  type Daemon,
  makeTree,
  PYTHON,
  sh,
  startDaemon,
  UIDS,
  until,
} from "../fixture/mod.ts";

/** The READ and WRITE requests the daemon logged (`--debug`) from byte `from` of its log on. */
function io(d: Daemon, from: number): number {
  return d.log().slice(from).split("\n").filter((l) => /^rx \d+: (READ|WRITE) /.test(l)).length;
}

// write, pwrite, pread, ftruncate, fstat, mmap (MAP_SHARED write), O_APPEND, stat by name while
// open, two opens of one file (written through one, read through the other), a file replaced
// by rename while open: every value as JSON
const PROBE = `
import json, mmap, os, sys
d = sys.argv[1]; r = {}; p = os.path.join(d, "pt")
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 300000)
os.pwrite(fd, b"hello", 10)
r["pread"] = os.pread(fd, 20, 5).decode()
os.ftruncate(fd, 200000)
st = os.fstat(fd); r["fstat"] = [st.st_size, oct(st.st_mode), st.st_nlink]
m = mmap.mmap(fd, 200000); m[0:5] = b"MMAPW"; m.flush(); r["mmap_read"] = m[8:17].decode(); m.close()
r["after_mmap"] = os.pread(fd, 5, 0).decode()
os.close(fd)
a = os.open(p, os.O_WRONLY | os.O_APPEND); os.write(a, b"APPENDED"); r["stat_open"] = os.stat(p).st_size; os.close(a)
data = open(p, "rb").read(); r["size"] = len(data); r["tail"] = data[-8:].decode(); r["head"] = data[:17].decode()
a = os.open(p, os.O_RDONLY); b = os.open(p, os.O_WRONLY)
os.pwrite(b, b"SHARED", 100); r["shared"] = os.pread(a, 6, 100).decode(); os.close(a); os.close(b)
q = os.path.join(d, "new"); open(q, "w").write("replacement")
o = os.open(p, os.O_RDWR); os.rename(q, p); os.pwrite(o, b"OLD", 0)
st = os.fstat(o); r["replaced"] = [os.pread(o, 5, 0).decode(), st.st_nlink, st.st_size]; os.close(o)
r["now"] = open(p).read()
print(json.dumps(r))
`;

Deno.test({
  name:
    "passthrough files: read, write, fstat, ftruncate, mmap, O_APPEND, shared opens and a replaced open file behave as on the backing dir, with no READ/WRITE request",
  ignore: PYTHON === null,
  fn: async () => {
    const tree = await makeTree();
    let d: Daemon | null = null;
    try {
      d = await startDaemon(tree, { args: ["--debug"] });
      const probe = `${tree.dir}/probe.py`;
      Deno.writeTextFileSync(probe, PROBE);
      for (const uid of UIDS) {
        const h = `${tree.mount}/home/${uid}`;
        const mk = await sh(`test -d ${h} || mkdir ${h}; mkdir ${h}/p`, { uid });
        assertEquals(mk.code, 0, mk.stderr);
        const raw = `${tree.dir}/raw${uid}`;
        const ref = await sh(`mkdir ${raw} && chown ${uid} ${raw}`);
        assertEquals(ref.code, 0, ref.stderr);
        const want = await sh(`${PYTHON} ${probe} ${raw}`, { uid });
        assertEquals(want.code, 0, want.stderr);
        const from = d.log().length;
        const got = await sh(`${PYTHON} ${probe} ${h}/p`, { uid });
        assertEquals([got.code, JSON.parse(got.stdout)], [0, JSON.parse(want.stdout)], got.stderr);
        assertEquals(io(d, from), 0, `uid ${uid}: reads and writes reached the daemon`);
        // the backing file holds what was written
        assertEquals(Deno.readTextFileSync(`${tree.root}/home/${uid}/p/pt`), "replacement");
      }
    } finally {
      await cleanup(tree, d);
    }
  },
});

Deno.test("controls opened for write and set-id files never get passthrough: their WRITEs reach the daemon", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree, { args: ["--debug"] });
    let from = d.log().length;
    const w = await sh(`printf 'line\\n' > ${tree.mount}/agent/coder.d/system.md`);
    assertEquals(w.code, 0, w.stderr);
    assert(io(d, from) >= 1, "a control write was not validated by the daemon");
    assertEquals(Deno.readTextFileSync(`${tree.root}/agent/coder.d/system.md`), "line\n");
    // a setuid file in another user's hands: the write goes through the daemon, which clears the bit
    const h = `${tree.mount}/home/1000`;
    const mk = await sh(`mkdir ${h} && touch ${h}/s && chmod 4777 ${h}/s`, { uid: 1000 });
    assertEquals(mk.code, 0, mk.stderr);
    from = d.log().length;
    const a = await sh(`echo x >> ${h}/s`, { uid: 65534 });
    assertEquals(a.code, 0, a.stderr);
    assert(io(d, from) >= 1, "a set-id file's write was passed through");
    assertEquals(Deno.statSync(`${tree.root}/home/1000/s`).mode! & 0o7777, 0o777);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("a passthrough file made set-id while another uid holds it open for writing: that uid's write clears the bits", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const f = `${tree.mount}/home/1000/s`;
    const mk = await sh(`mkdir ${tree.mount}/home/1000 && touch ${f} && chmod 666 ${f}`, {
      uid: 1000,
    });
    assertEquals(mk.code, 0, mk.stderr);
    // opened (passthrough: no set-id bit yet), made 6777 by its owner, then written
    // The writer says when its fd is open and writes only once told: events, not a sleep.
    const sync = Deno.makeTempDirSync();
    Deno.chmodSync(sync, 0o777);
    const writer = sh(
      `exec 3>>${f}; : > ${sync}/opened; while [ ! -e ${sync}/go ]; do sleep 0.01; done; echo evil >&3`,
      { uid: 65534 },
    );
    await until(() => {
      try {
        return Deno.statSync(`${sync}/opened`).isFile;
      } catch {
        return false;
      }
    }, "the writer's open");
    const ch = await sh(`chmod 6777 ${f} && stat -c %a ${f}`, { uid: 1000 });
    assertEquals([ch.code, ch.stdout], [0, "6777\n"], ch.stderr);
    Deno.writeTextFileSync(`${sync}/go`, "");
    assertEquals((await writer).code, 0);
    Deno.removeSync(sync, { recursive: true });
    const st = Deno.statSync(`${tree.root}/home/1000/s`);
    assertEquals([st.mode! & 0o7777, st.size], [0o777, 5]);
  } finally {
    await cleanup(tree, d);
  }
});
