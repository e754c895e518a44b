/** user.* extended attributes in home/shared are the backing file's, set and read as the caller; the projection's stay read-only elsewhere. */
import { assertEquals } from "../assert.ts";
import { sh, UIDS, withMount } from "../fixture/mod.ts";

Deno.test("user.* xattrs in home/: setfattr/getfattr/listxattr/removexattr as the caller, on the backing file, symlinks untouched", async () => {
  await withMount(async ({ tree, home }) => {
    for (const uid of UIDS) {
      const h = await home(uid);
      const r = await sh(
        `set -e; cd ${h}; echo x > f; mkdir d; ln -s f l
         setfattr -n user.color -v blue f; setfattr -n user.empty f; setfattr -n user.tag -v dir d
         getfattr -n user.color --only-values f; echo
         getfattr -d --absolute-names f d | grep -v '^#' | grep .
         setfattr -x user.color f
         getfattr -n user.color f 2>&1 | sed 's/.*: //' || true
         setfattr -h -n user.color -v x l 2>&1 | sed 's/.*: //' || true
         getfattr -n user.cortexfs.kind --only-values d; echo
         setfattr -n user.cortexfs.kind -v x f 2>&1 | sed 's/.*: //' || true
         setfattr -n trusted.x -v x f 2>&1 | sed 's/.*: //' || true`,
        { uid },
      );
      assertEquals(
        [r.code, r.stdout.split("\n")],
        [0, [
          "blue",
          'user.color="blue"',
          'user.empty=""',
          'user.tag="dir"',
          "No such attribute",
          "Operation not permitted",
          "dir",
          "Operation not permitted",
          // trusted.*: the kernel refuses it without CAP_SYS_ADMIN; root gets the mount's ENOTSUP
          uid === 0 ? "Operation not supported" : "Operation not permitted",
          "",
        ]],
        r.stderr,
      );
      // stored on the backing file, not through the symlink
      const b = await sh(
        `getfattr -h -d --absolute-names ${tree.root}/home/${uid}/f ${tree.root}/home/${uid}/l`,
      );
      assertEquals(b.stdout.split("\n").filter((l) => l.startsWith("user.")), ['user.empty=""']);
    }
    // another uid may not set attributes on a file it cannot write, and reads what it may read
    const p = `${tree.mount}/home/0/f`;
    assertEquals((await sh(`chmod 755 ${tree.mount}/home/0; chmod 644 ${p}`)).code, 0);
    const o = await sh(
      `setfattr -n user.x -v 1 ${p} 2>&1 | sed 's/.*: //'; getfattr -n user.empty --only-values ${p}; echo "=$?"`,
      { uid: 1000 },
    );
    assertEquals(o.stdout, "Permission denied\n=0\n", o.stderr);
    // controls and the projection keep their answers
    const c = await sh(
      `setfattr -n user.x -v 1 ${tree.mount}/agent/coder.d/window 2>&1 | sed 's/.*: //'; ` +
        `setfattr -n user.x -v 1 ${tree.mount}/agent/coder 2>&1 | sed 's/.*: //'`,
    );
    assertEquals(c.stdout, "Operation not supported\nRead-only file system\n");
  });
});
