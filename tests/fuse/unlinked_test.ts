/** Open files keep working after their last name goes (unlink, or a rename over it): attributes come from the open file. */
import { assertEquals } from "../assert.ts";
import { PYTHON, sh, UIDS, withMount } from "../fixture/mod.ts";

const SCRIPT = `
import os, sys, tempfile
d = sys.argv[1]
p = d + "/f"
with open(p, "w+") as f:
    f.write("hello"); f.flush()
    os.unlink(p)
    st = os.fstat(f.fileno())
    f.write(" world"); f.flush()
    os.fchmod(f.fileno(), 0o600)
    os.ftruncate(f.fileno(), 8)
    os.utime(f.fileno(), (1000000000, 1000000000))
    st2 = os.fstat(f.fileno())
    f.seek(0)
    print(st.st_nlink, st.st_size, st2.st_nlink, st2.st_size, oct(st2.st_mode & 0o777), int(st2.st_mtime), f.read())
a, b = d + "/a", d + "/b"
with open(b, "w") as g:
    g.write("new")
with open(a, "w+") as f:
    f.write("old"); f.flush()
    os.rename(b, a)
    st = os.fstat(f.fileno())
    f.seek(0)
    print(st.st_nlink, st.st_size, f.read(), open(a).read())
with tempfile.TemporaryFile(dir=d) as t:
    t.write(b"tmp"); t.flush()
    print(os.fstat(t.fileno()).st_size, os.listdir(d))
`;

Deno.test({
  name:
    "fstat/fchmod/ftruncate/futimens of an unlinked or replaced open file (TemporaryFile, editors), root and uid 1000",
  ignore: PYTHON === null,
  fn: () =>
    withMount(async ({ home }) => {
      for (const uid of UIDS) {
        const h = await home(uid);
        assertEquals((await sh(`mkdir ${h}/u`, { uid })).code, 0);
        const r = await sh(`${PYTHON} -c '${SCRIPT}' ${h}/u`, { uid });
        assertEquals(
          [r.code, r.stdout],
          [0, "0 5 0 8 0o600 1000000000 hello wo\n0 3 old new\n3 ['a']\n"],
          r.stderr,
        );
      }
    }),
});
