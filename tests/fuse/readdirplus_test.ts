/** READDIRPLUS: home/shared listings carry each entry's attributes (no LOOKUP per entry); controls and projections keep their own. */
import { assert, assertEquals } from "../assert.ts";
import { cleanup, type Daemon, makeTree, sh, startDaemon } from "../fixture/mod.ts";

/** The LOOKUP requests the daemon logged (`--debug`) from byte `from` of its log on. */
function lookups(d: Daemon, from: number): string[] {
  return d.log().slice(from).split("\n").filter((l) => / LOOKUP /.test(l));
}

/** `ls -ln` with exact times, the header line dropped. */
const LS = "ls -lna --time-style=+%s.%N";
const body = (s: string) => s.split("\n").filter((l) => l && !l.startsWith("total")).join("\n");

Deno.test("ls -l of a home directory: entries come with their attributes, no LOOKUP per entry, as a second uid too", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    // made behind the mount: the kernel has never seen these names
    const dir = `${tree.root}/home/1000/d`;
    await sh(
      `mkdir -p ${dir}/sub && cd ${dir} && for i in $(seq 0 29); do echo $i > f$i; done && ` +
        `ln -s f1 link && ln f2 hard && touch -d 1960-01-01 f3 && chmod 4755 f4 && mkfifo fifo && ` +
        `chown -R 1000:1000 ${tree.root}/home/1000 && echo s > secret && chmod 600 secret`,
    );
    d = await startDaemon(tree, { args: ["--debug"] });
    const mnt = `${tree.mount}/home/1000/d`;
    for (const uid of [1000, 0]) {
      // make the kernel forget its entries (instead of waiting out their 1 s timeouts), so that
      // every listed entry is new to it
      Deno.writeTextFileSync("/proc/sys/vm/drop_caches", "2");
      const from = d.log().length;
      const got = await sh(`cd ${mnt} && ${LS}`, { uid });
      assertEquals(got.code, 0, got.stderr);
      const want = await sh(`cd ${dir} && ${LS}`);
      // the backing directory's own listing, entry by entry (names, types, modes, links, owners, sizes, times)
      assertEquals(body(got.stdout), body(want.stdout));
      // the path's own components may be looked up again; the listed names never are
      const n = lookups(d, from).filter((l) => !/"(home|1000|d)"$/.test(l));
      assertEquals(n.length, 0, `uid ${uid}: ${n.length} LOOKUPs for 37 entries:\n${n.join("\n")}`);
    }
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("ls -l of a control directory: each control keeps its own LOOKUP and attributes (env 0600, owner shown)", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree, { args: ["--debug"] });
    const cdir = `${tree.mount}/agent/coder.d`;
    const from = d.log().length;
    const ls = await sh(`cd ${cdir} && ls -ln`);
    assertEquals(ls.code, 0, ls.stderr);
    const names = ls.stdout.split("\n").filter((l) => l && !l.startsWith("total"));
    const env = names.find((l) => l.endsWith(" env"));
    assert(env?.startsWith("-rw------- "), `env is shown 0600: ${env}`);
    // no entry came with a node: every control was looked up by name
    assert(lookups(d, from).length >= names.length, `${lookups(d, from).length} < ${names.length}`);
    // and each shows what a stat of it by name answers
    const st = await sh(`cd ${cdir} && stat -c '%A %u %s %n' * | sort -k4`);
    const fromLs = names.map((l) => l.split(/\s+/)).map((f) => `${f[0]} ${f[2]} ${f[4]} ${f[8]}`)
      .sort((a, b) => a.split(" ")[3] < b.split(" ")[3] ? -1 : 1);
    assertEquals(fromLs.join("\n"), st.stdout.trim());
  } finally {
    await cleanup(tree, d);
  }
});
