/** Inside home/ only the agent-home runtime paths are special: `tool/x.d/`, `model/a/b.d/` and the like are ordinary directories. */
import { assertEquals } from "../assert.ts";
import { sh, UIDS, withMount } from "../fixture/mod.ts";

Deno.test("home/<uid>/tool/x.d and home/<uid>/model/a/b.d are plain directories for root and uid 1000", async () => {
  await withMount(async ({ tree, home }) => {
    for (const uid of UIDS) {
      const h = await home(uid);
      const r = await sh(
        `set -e; cd ${h}; mkdir -p tool/x.d model/a/b.d shared.d/y.d
         for d in tool/x.d model/a/b.d shared.d/y.d; do
           echo hi > $d/notes; echo more >> $d/notes; mv $d/notes $d/n2; ln -s n2 $d/l; cat $d/l
           truncate -s 1 $d/n2; stat -c '%s %u' $d/n2; rm $d/n2 $d/l
         done
         getfattr -n user.cortexfs.kind --only-values tool/x.d; echo
         rmdir tool/x.d model/a/b.d`,
        { uid },
      );
      assertEquals(
        [r.code, r.stdout],
        [0, `hi\nmore\n1 ${uid}\n`.repeat(3) + "dir\n"],
        r.stderr,
      );
      assertEquals(Deno.statSync(`${tree.root}/home/${uid}/shared.d/y.d`).uid, uid);
    }
  });
});
