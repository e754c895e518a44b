/** Per-architecture facts: a refusal on an unknown architecture, and the layout in use decodes real stats. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { archFacts } from "./arch.ts";
import { close, fstat, O, open } from "./libc.ts";

Deno.test("archFacts() refuses an architecture it has no constants for", () => {
  const e = assertThrows(() => archFacts("riscv64"), CtxError);
  assertEquals(e.errno, "ENOTSUP");
  assertEquals(e.message.includes("riscv64"), true);
});

Deno.test("aarch64's open flags are its own (its O_NOFOLLOW is not x86_64's)", () => {
  const x86 = archFacts("x86_64").O, arm = archFacts("aarch64").O;
  assertEquals([arm.DIRECTORY, arm.NOFOLLOW, arm.TMPFILE], [0o40000, 0o100000, 0o20040000]);
  assertEquals([x86.DIRECTORY, x86.NOFOLLOW, x86.TMPFILE], [0o200000, 0o400000, 0o20200000]);
  assertEquals(arm.NOFOLLOW === x86.NOFOLLOW, false);
});

Deno.test("this architecture's struct stat layout decodes what Deno itself reports", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/f`;
    Deno.writeTextFileSync(path, "hello");
    Deno.linkSync(path, `${dir}/g`); // nlink 2
    Deno.chmodSync(path, 0o640);
    const fd = open(new TextEncoder().encode(path + "\0"), O.RDONLY | O.NOFOLLOW);
    assertEquals(fd >= 0, true);
    const st = fstat(fd);
    close(fd);
    if (typeof st === "number") throw new Error(`fstat: ${st}`);
    const want = Deno.statSync(path);
    assertEquals(
      [st.ino, st.mode, st.nlink, st.uid, st.gid, st.size, st.blocks, st.mtime],
      [
        want.ino,
        want.mode,
        want.nlink,
        want.uid,
        want.gid,
        want.size,
        want.blocks,
        Math.floor(want.mtime!.getTime() / 1000), // a file just written has an mtime
      ],
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("FUSE backing ioctls are _IOW(229, n, size) in the generic encoding on both architectures", () => {
  for (const a of ["x86_64", "aarch64"]) {
    const ioc = archFacts(a).IOC;
    assertEquals([ioc.FUSE_BACKING_OPEN, ioc.FUSE_BACKING_CLOSE], [0x4010e501, 0x4004e502]);
  }
});

Deno.test("socket numbers are the asm-generic ones on both architectures; SOCK_NONBLOCK and SOCK_CLOEXEC are the O_ bits", () => {
  for (const a of ["x86_64", "aarch64"]) {
    const { SOCK, SO, O } = archFacts(a);
    assertEquals([SOCK, SO], [
      { STREAM: 1, DGRAM: 2, SEQPACKET: 5, NONBLOCK: O.NONBLOCK, CLOEXEC: O.CLOEXEC },
      { SOL_SOCKET: 1, TYPE: 3, PEERCRED: 17, ACCEPTCONN: 30, DOMAIN: 39, PEERPIDFD: 77 },
    ]);
  }
});
