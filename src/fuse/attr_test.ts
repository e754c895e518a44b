/** Attributes copied straight from the stat buffer encode exactly as the decoded ones do. */
import { assertEquals } from "../../tests/assert.ts";
import * as libc from "../sys/libc.ts";
import { fromStat, putAttr, putEntry, putRawAttr, putRawEntry, rawStat } from "./attr.ts";

Deno.test("putRawAttr/putRawEntry write the bytes putAttr/putEntry write for the same stat (a file, a directory, a link, a device, pre-1970 times, a large sparse size)", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/f`, "x");
    Deno.utimeSync(
      `${dir}/f`,
      new Date("1960-01-01T00:00:00.25Z"),
      new Date("1969-12-31T23:59:59Z"),
    );
    using big = Deno.openSync(`${dir}/big`, { create: true, write: true });
    big.truncateSync(2 ** 40 + 123); // sizes above 32 bits
    Deno.symlinkSync("f", `${dir}/l`);
    for (const p of [`${dir}/f`, `${dir}/big`, dir, `${dir}/l`, "/dev/null"]) {
      const st = libc.statAt(libc.AT_FDCWD, libc.cstr(p), libc.AT_SYMLINK_NOFOLLOW);
      if (typeof st === "number") throw new Error(`${p}: ${st}`);
      // statAt leaves its bytes in the buffer the raw encoders read
      const want = new Uint8Array(256), got = new Uint8Array(256);
      for (const ttl of [0, 1, 1.5]) {
        const n = putAttr(want, { attr: fromStat(st), ttl });
        assertEquals(putRawAttr(got, ttl), n);
        assertEquals(got.subarray(0, n), want.subarray(0, n), `${p} attr ttl ${ttl}`);
        const m = putEntry(want, { nodeid: 2 ** 33 + 7, attr: fromStat(st), ttl });
        assertEquals(putRawEntry(got, 2 ** 33 + 7, ttl), m);
        assertEquals(got.subarray(0, m), want.subarray(0, m), `${p} entry ttl ${ttl}`);
      }
      assertEquals(
        [rawStat.ino(), rawStat.dev(), rawStat.nlink(), rawStat.mode()],
        [st.ino, st.dev, st.nlink, st.mode],
      );
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
