/** Writes and truncates clear setuid/setgid as the kernel does: a non-owner's write succeeds and drops the bits; CAP_FSETID keeps them. */
import { assertEquals } from "../assert.ts";
import { sh, withMount } from "../fixture/mod.ts";

Deno.test("setuid/setgid files: a non-owner's write or truncate succeeds and clears the bits; root's write keeps them", async () => {
  await withMount(async ({ tree }) => {
    const pub = `${tree.mount}/shared/pub`;
    // root's files, writable by everyone: 6777 (suid, sgid + group exec), 2666 (sgid without group exec)
    const made = await sh(
      `mkdir ${pub} && chmod 777 ${pub} && cd ${pub} &&
       for f in w t o r; do echo x > $f; chmod 6777 $f; done; echo x > g && chmod 2666 g`,
    );
    assertEquals(made.code, 0, made.stderr);
    // uid 1000: append (write), truncate, open O_TRUNC; a sgid file without group exec keeps sgid
    const u = await sh(
      `cd ${pub} && echo more >> w && truncate -s 1 t && echo new > o && echo more >> g && ` +
        `stat -c '%n %a %s' w t o g`,
      { uid: 1000 },
    );
    assertEquals(
      [u.code, u.stdout],
      [0, "w 777 7\nt 777 1\no 777 4\ng 2666 7\n"],
      u.stderr,
    );
    // root holds CAP_FSETID: its write keeps the bits (kernel semantics)
    const r = await sh(`cd ${pub} && echo more >> r && stat -c '%n %a' r`);
    assertEquals([r.code, r.stdout], [0, "r 6777\n"], r.stderr);
    // the backing files agree
    const mode = (f: string) => Deno.statSync(`${tree.root}/shared/pub/${f}`).mode! & 0o7777;
    assertEquals(["w", "t", "o", "g", "r"].map(mode), [0o777, 0o777, 0o777, 0o2666, 0o6777]);
    assertEquals(Deno.readTextFileSync(`${tree.root}/shared/pub/w`), "x\nmore\n");
  });
});
