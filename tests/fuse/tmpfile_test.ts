/** O_TMPFILE (+ linkat), fallocate and SEEK_DATA/SEEK_HOLE in home/ answer what the backing file system answers. */
import { assert, assertEquals } from "../assert.ts";
import { sh, UIDS, withMount } from "../fixture/mod.ts";

const here = new URL(".", import.meta.url).pathname;

Deno.test("O_TMPFILE + linkat, fallocate (allocate, keep size, punch, zero) and SEEK_DATA/SEEK_HOLE: the same through the mount as on the backing dir", async () => {
  await withMount(async ({ tree, home }) => {
    const probe = `${tree.dir}/probe`;
    const cc = await sh(`gcc -O2 -o ${probe} ${here}tmpfile_probe.c && chmod 755 ${probe}`);
    assertEquals([cc.code, cc.stderr], [0, ""]);
    for (const uid of UIDS) {
      const h = await home(uid);
      // the reference: the same probe straight on the backing file system, as the same uid
      const raw = `${tree.root}/home/${uid}/raw`;
      const ref = await sh(`mkdir ${raw} && ${probe} ${raw}`, { uid });
      assertEquals(ref.code, 0, ref.stderr);
      const got = await sh(`mkdir ${h}/m && ${probe} ${h}/m`, { uid });
      assertEquals([got.code, got.stdout], [0, ref.stdout], got.stderr);
      for (const line of ["tmpfile=0", "link=0", "content=hello", "fallocate=0", "punch=0"]) {
        assert(got.stdout.split("\n").includes(line), `${line} in\n${got.stdout}`);
      }
      assert(/seek_data=4194304\n/.test(got.stdout), got.stdout);
      // the unnamed file was born the caller's and is a plain file once linked
      const st = Deno.statSync(`${tree.root}/home/${uid}/m/named`);
      assertEquals([st.uid, st.mode! & 0o777, st.nlink], [uid, 0o640, 1]);
    }
  });
});
