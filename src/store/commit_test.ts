import { GroupCommit } from "./commit.ts";
import { CtxError } from "../abi/errno.ts";
import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { O, open } from "../sys/libc.ts";

/** An fsync the test releases by hand; records which fd each call got. */
function manual() {
  const calls: number[] = [];
  const waiting: ((r: number) => void)[] = [];
  return {
    calls,
    fsync: (fd: number) => {
      calls.push(fd);
      return new Promise<number>((r) => waiting.push(r));
    },
    release: (r = 0) => waiting.shift()?.(r),
  };
}

const devNull = () => open(new TextEncoder().encode("/dev/null\0"), O.RDONLY);

Deno.test("GroupCommit: records arriving while an fsync runs share the next one (O(flushes))", async () => {
  const m = manual();
  const c = new GroupCommit("/h", { fsync: m.fsync });
  const done: number[] = [];
  const first = c.sync(devNull()).then(() => done.push(0));
  const rest = Array.from(
    { length: 100 },
    (_, i) => c.sync(devNull()).then(() => done.push(i + 1)),
  );
  assertEquals(m.calls.length, 1); // the first runs alone; the 100 wait together
  m.release();
  await first;
  assertEquals(done, [0]); // none of the 100 is durable before its own fsync
  await Promise.resolve();
  assertEquals(m.calls.length, 2);
  m.release();
  await Promise.all(rest);
  assertEquals(done.length, 101);
  assertEquals(c.busy, false);
});

Deno.test("GroupCommit: a failed fsync rejects exactly the records it covered (EIO)", async () => {
  const m = manual();
  const c = new GroupCommit("/h", { fsync: m.fsync });
  const a = c.sync(devNull());
  const b = c.sync(devNull());
  m.release(-5);
  const e = await assertRejects(() => a, CtxError);
  assertEquals(e.errno, "EIO");
  await Promise.resolve();
  m.release(0);
  await b; // the next flush succeeded
});
