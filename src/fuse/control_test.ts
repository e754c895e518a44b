import { assertEquals } from "../../tests/assert.ts";
import { CtxError, ERRNO } from "../abi/errno.ts";
import { ControlWriter } from "./control.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A writer over a fake control whose rule is "every line starts with ok"; commits are recorded. */
function writer(initial: string, options: { truncated?: boolean; append?: boolean } = {}) {
  const committed: string[] = [];
  const rule = (bytes: Uint8Array) => {
    const text = dec.decode(bytes);
    const lines = text.split("\n").slice(0, -1);
    if (text !== "" && (!lines.every((l) => l.startsWith("ok")) || !text.endsWith("\n"))) {
      throw new CtxError("EINVAL", `bad ${JSON.stringify(text)}`);
    }
  };
  const w = new ControlWriter("agent/a.d/policy", {
    uid: 0,
    gid: 0,
    initial: enc.encode(options.truncated ? "" : initial),
    truncated: options.truncated ?? false,
    append: options.append,
    check: (_p, bytes) => rule(bytes),
    commit: (_p, bytes) => {
      rule(bytes);
      committed.push(dec.decode(bytes));
    },
  });
  return { w, committed };
}

Deno.test("ControlWriter: nothing commits before a close by the first flusher; then the whole buffer", () => {
  const { w, committed } = writer("ok old\n", { truncated: true });
  assertEquals(w.flush(7), 0); // the shell's close after dup2: "" is judged, not committed
  assertEquals(w.write(0, enc.encode("ok 1\n")), 5);
  assertEquals(w.write(5, enc.encode("ok")), 2); // mid-line: not judged
  assertEquals(w.flush(8), -ERRNO.EINVAL); // another process's close: judged, nothing spoiled
  assertEquals(w.write(7, enc.encode(" 2\n")), 3);
  assertEquals(w.flush(8), 0);
  assertEquals(committed, []);
  assertEquals(w.flush(7), 0);
  w.release();
  assertEquals(committed, ["ok 1\nok 2\n"]);
});

Deno.test("ControlWriter: a failed write spoils the handle; later writes, flushes and release commit nothing", () => {
  const { w, committed } = writer("ok old\n", { truncated: true });
  assertEquals(w.write(0, enc.encode("ok 1\n")), 5);
  assertEquals(w.write(5, enc.encode("bad\n")), -ERRNO.EINVAL);
  assertEquals(w.write(0, enc.encode("ok 2\n")), -ERRNO.EINVAL);
  assertEquals(w.truncate(0), -ERRNO.EINVAL);
  assertEquals([w.flush(1), w.flush(1), w.flush(null)], [
    -ERRNO.EINVAL,
    -ERRNO.EINVAL,
    -ERRNO.EINVAL,
  ]);
  w.release();
  assertEquals(committed, []);
  const big = writer("ok old\n");
  assertEquals(big.w.write(0, new Uint8Array(70_000)), -ERRNO.EMSGSIZE);
  assertEquals(big.w.flush(1), -ERRNO.EMSGSIZE);
  big.w.release();
  assertEquals(big.committed, []);
});

Deno.test("ControlWriter: O_APPEND writes go to the end of the handle's content; O_TRUNC alone commits at release", () => {
  const { w, committed } = writer("ok 0\n", { append: true });
  assertEquals(w.write(0, enc.encode("ok 1\n")), 5); // a stale kernel offset
  assertEquals(w.write(5, enc.encode("ok 2\n")), 5);
  assertEquals(w.flush(3), 0);
  assertEquals(committed, ["ok 0\nok 1\nok 2\n"]);
  const empty = writer("ok 0\n", { truncated: true });
  assertEquals([empty.w.flush(1), empty.w.flush(1)], [0, 0]); // `: > f`: two closes, no write
  assertEquals(empty.committed, []);
  empty.w.release();
  assertEquals(empty.committed, [""]);
  const sync = writer("ok 0\n");
  assertEquals(sync.w.truncate(0), 0);
  assertEquals(sync.w.write(0, enc.encode("ok t\n")), 5);
  assertEquals(sync.w.flush(null), 0); // fsync commits what was written
  assertEquals(sync.committed, ["ok t\n"]);
});
