/** Issue 24, item 3: a name swapped in the backing tree behind the kernel's cached attributes opens nothing the caller could not open. */
import { assert, assertEquals } from "../assert.ts";
import { cleanup, makeTree, sh, startDaemon } from "../fixture/mod.ts";

/** The victim and the attacker: two ordinary uids. */
const A = 1000, B = 1001;

Deno.test("OPEN of a name B swapped to A's 0600 file in the backing tree (within the attribute timeout) reads and appends nothing of it", async () => {
  const tree = await makeTree();
  // A long attribute timeout: the kernel keeps B's attributes for the name for the whole test,
  // as it does within any timeout on a loaded machine.
  const d = await startDaemon(tree, { args: ["--ttl", "3600"] });
  try {
    const name = `swap-${crypto.randomUUID()}`;
    const back = `${tree.root}/shared/${name}`, mnt = `${tree.mount}/shared/${name}`;
    // A directory both may rename in (no sticky bit), as a shared bind or group directory gives.
    await Deno.mkdir(back, { mode: 0o777 });
    await Deno.chmod(back, 0o777);
    const secret = `SECRET-${crypto.randomUUID()}`;
    const made = await sh(`umask 077; printf %s ${secret} > ${back}/secret`, { uid: A });
    assertEquals(made.code, 0, made.stderr);
    const mine = await sh(`umask 077; echo mine > ${back}/mine; echo own > ${back}/own`, {
      uid: B,
    });
    assertEquals(mine.code, 0, mine.stderr);

    // B: the kernel looks `mine` up (B's file, B's attributes cached), then B renames A's
    // secret over it in the backing tree and opens the name through the mount.
    const r = await sh(
      [
        `stat -c %U ${mnt}/mine >/dev/null`,
        `mv ${back}/secret ${back}/mine`,
        `cat ${mnt}/mine; echo " read=$?"`,
        `echo APPENDED >> ${mnt}/mine; echo "append=$?"`,
        `cat ${mnt}/own`,
      ].join("\n"),
      { uid: B },
    );
    assert(!r.stdout.includes(secret), `B read A's secret through the mount: ${r.stdout}`);
    assertEquals(r.stdout.split("\n").filter((l) => !l.startsWith("cat")).map((l) => l.trim()), [
      "read=1",
      "append=1",
      "own",
      "",
    ]);
    // A's file is as A wrote it, and the mount still answers an unrelated user.
    assertEquals(await Deno.readTextFile(`${back}/mine`), secret);
    const st = await sh(`stat -c %F ${tree.mount}/status`, { uid: 65534 });
    assertEquals(st.code, 0, st.stderr);
  } finally {
    await cleanup(tree, d);
  }
});
