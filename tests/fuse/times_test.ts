/** Timestamps are signed: times before 1970 survive utimensat and stat through the mount, for root and a second uid. */
import { assertEquals } from "../assert.ts";
import { PYTHON, sh, UIDS, withMount } from "../fixture/mod.ts";

const SCRIPT = `
import os, sys
p = sys.argv[1]
open(p, "w").close()
os.utime(p, ns=(-1_500_000_000, -315_619_200_123_456_789))  # 1969-12-31T23:59:58.5, 1960-01-01
st = os.stat(p)
print(st.st_atime_ns, st.st_mtime_ns)
`;

Deno.test({
  name:
    "times before 1970: touch -d 1960-01-01 and utimensat with negative seconds read back exactly",
  ignore: PYTHON === null,
  fn: () =>
    withMount(async ({ tree, home }) => {
      for (const uid of UIDS) {
        const h = await home(uid);
        const t = await sh(
          `cd ${h} && touch -d 1960-01-01T00:00:00Z old && stat -c '%X %Y' old && ` +
            `touch -d @-1 edge && stat -c '%Y' edge`,
          { uid },
        );
        assertEquals([t.code, t.stdout], [0, "-315619200 -315619200\n-1\n"], t.stderr);
        const p = await sh(`${PYTHON} -c '${SCRIPT}' ${h}/ns`, { uid });
        assertEquals(
          [p.code, p.stdout],
          [0, "-1500000000 -315619200123456789\n"],
          p.stderr,
        );
        // the backing file holds the same times
        const st = Deno.statSync(`${tree.root}/home/${uid}/old`);
        assertEquals(st.mtime!.getTime(), -315619200_000);
      }
    }),
});
