/** Backing calls never follow a symlink on the way, act on a final symlink itself, and cached parents follow the tree. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { Backing, noMemo, type Place } from "./backing.ts";

const E = ERRNO;
const c = (s: string) => libc.cstr(s);
const place = (parent: string, name: string, fresh = false): Place => ({
  parent,
  name: c(name),
  fresh,
  memo: noMemo(),
});

/** The first bytes of the file a backing call on `p` reaches, as text, or -errno. */
function readAt(b: Backing, p: Place): string | number {
  const at = b.at(p);
  if (typeof at === "number") return at;
  const fd = b.dir.open(at, libc.O.RDONLY);
  if (fd < 0) return fd;
  const buf = new Uint8Array(16);
  const n = libc.pread(fd, buf, 0);
  libc.close(fd);
  return new TextDecoder().decode(buf.subarray(0, n));
}

async function withTree(fn: (root: string, outside: string, b: Backing) => void): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "cortexfs-backing-" });
  const outside = await Deno.makeTempDir({ prefix: "cortexfs-outside-" });
  const b = new Backing(root);
  try {
    Deno.mkdirSync(`${root}/home/1/d`, { recursive: true });
    Deno.writeTextFileSync(`${root}/home/1/d/f`, "inside");
    Deno.writeTextFileSync(`${outside}/f`, "outside");
    Deno.chmodSync(`${outside}/f`, 0o600);
    fn(root, outside, b);
  } finally {
    b.settle();
    b.dir.close();
    await Deno.remove(root, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
}

Deno.test("Backing.at() refuses a symlink in any directory component (absolute, relative, fresh or cached): ELOOP", async () => {
  await withTree((root, outside, b) => {
    Deno.symlinkSync(outside, `${root}/home/1/abs`);
    Deno.symlinkSync("d", `${root}/home/1/rel`);
    const results = [
      b.at(place("home/1/abs", "f")),
      b.at(place("home/1/rel", "f")),
      b.at(place("home/1/abs", "f", true)),
      b.at(place("home/1/rel/..", "d")),
    ];
    assertEquals(results, [-E.ELOOP, -E.ELOOP, -E.ELOOP, -E.ELOOP]);
    // a climb out without symlinks is refused too
    assertEquals(b.at(place("home/../..", "x")), -E.EXDEV);
    assertEquals(b.cached, 0);
  });
});

Deno.test("Backing: calls on a final symlink act on the link itself (lstat, readlink, rename, unlink) or fail (open ELOOP, chmod EOPNOTSUPP)", async () => {
  await withTree((root, outside, b) => {
    Deno.symlinkSync(`${outside}/f`, `${root}/home/1/d/link`);
    const dir = b.dir;
    const at = b.at(place("home/1/d", "link"));
    assert(typeof at !== "number");
    const st = dir.lstat(at);
    assert(typeof st !== "number");
    assertEquals(st.mode & 0o170000, 0o120000);
    assertEquals(new TextDecoder().decode(dir.readlink(at) as Uint8Array), `${outside}/f`);
    assertEquals(dir.open(at, libc.O.RDONLY), -E.ELOOP);
    assertEquals(dir.truncate(at, 0), -E.ELOOP);
    assertEquals(dir.chmod(at, 0o666), -E.ENOTSUP); // EOPNOTSUPP == ENOTSUP on Linux
    assertEquals(dir.lchown(at, { uid: 1, gid: 1 }), 0); // the link's owner, not the target's
    assertEquals(dir.utimens(at, { atime: [1, 0], mtime: [1, 0] }), 0);
    const to = b.at(place("home/1/d", "link2"));
    assert(typeof to !== "number");
    assertEquals(dir.rename(at, to), 0);
    assertEquals(dir.unlink(to), 0);
    const target = Deno.statSync(`${outside}/f`);
    assertEquals([target.mode! & 0o7777, target.uid, Deno.readTextFileSync(`${outside}/f`)], [
      0o600,
      0,
      "outside",
    ]);
  });
});

Deno.test("Backing: a cached parent fd is dropped when a stat finds another directory at its path, or when forgotten", async () => {
  await withTree((root, _outside, b) => {
    const dir = b.dir;
    const read = (p: Place) => readAt(b, p);
    assertEquals(read(place("home/1/d", "f")), "inside");
    assertEquals(b.cached, 1);
    // behind the mount: d moves away and a new d appears
    Deno.renameSync(`${root}/home/1/d`, `${root}/home/1/old`);
    Deno.mkdirSync(`${root}/home/1/d`);
    Deno.writeTextFileSync(`${root}/home/1/d/f`, "new");
    assertEquals(read(place("home/1/d", "f")), "inside"); // the fd follows its directory...
    const home = b.at(place("home/1", "d"));
    assert(typeof home !== "number");
    b.seen("home/1/d", dir.lstat(home)); // ...until a stat of d finds another directory
    b.settle();
    assertEquals(b.cached, 1); // home/1 itself
    assertEquals(read(place("home/1/d", "f")), "new");
    assertEquals(read(place("home/1/d", "f", true)), "new"); // fresh: opened for this call only
    b.forget("home");
    b.settle();
    assertEquals(b.cached, 0);
  });
});

Deno.test("Backing: places kept across calls (their memo) follow the cache: a directory replaced behind the mount, a forget, a new entry", async () => {
  await withTree((root, _outside, b) => {
    const dir = b.dir;
    const f = place("home/1/d", "f"), d = place("home/1", "d"), g = place("home/1/e", "g");
    const read = (p: Place) => readAt(b, p);
    const stat = (p: Place) => {
      const fd = b.parentFd(p);
      assert(fd >= 0, `parent of ${p.parent}: ${fd}`);
      return dir.lstatIn(fd, p.name);
    };
    assertEquals(read(f), "inside");
    b.seen("home/1/d", stat(d), d); // the same directory: kept
    assertEquals(read(f), "inside");
    Deno.renameSync(`${root}/home/1/d`, `${root}/home/1/old`);
    Deno.mkdirSync(`${root}/home/1/d`);
    Deno.writeTextFileSync(`${root}/home/1/d/f`, "new");
    assertEquals(read(f), "inside"); // the memo, like the cache, names the old directory...
    b.seen("home/1/d", stat(d), d); // ...until a stat of d finds another one there
    b.settle();
    assertEquals(read(f), "new");
    // A new cached directory elsewhere moves the version: the memos look again and still agree.
    Deno.mkdirSync(`${root}/home/1/e`);
    Deno.writeTextFileSync(`${root}/home/1/e/g`, "g");
    assertEquals(read(g), "g");
    assertEquals(read(f), "new");
    b.forget("home/1/d");
    b.settle();
    Deno.removeSync(`${root}/home/1/d`, { recursive: true });
    assertEquals(read(f), -E.ENOENT); // forgotten: reopened, and gone
  });
});
