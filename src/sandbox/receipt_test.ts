/** pinProcess(): a pidfd opened first and the receipt checked after, so the fd names the recorded process or is closed again. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { ERRNO } from "../abi/errno.ts";
import { orphan, pidfdsSince } from "../../tests/fixture/proc.ts";
import { closeFd } from "../sys/sock.ts";
import { waitExits } from "../sys/wait.ts";
import { pinProcess } from "./receipt.ts";

Deno.test("pinProcess() gives a pidfd when the receipt matches after the open, stale with the fd closed again when it does not, and no fd when the check cannot read /proc", async () => {
  const o = await orphan();
  const left = pidfdsSince([o.pid]);
  try {
    let checked = 0;
    assertEquals(pinProcess(o.pid, () => (checked++, "gone")), "stale");
    assertEquals([checked, left()], [1, []]);
    // /proc unreadable (EMFILE) proves nothing: no fd given, and the one opened is closed again
    assertEquals(pinProcess(o.pid, () => (checked++, "unknown")), -ERRNO.EIO);
    assertEquals([checked, left()], [2, []]);
    const fd = pinProcess(o.pid, () => left().length > 0 ? "live" : "gone"); // checked after the open
    assert(typeof fd === "number" && fd >= 0, `pinProcess: ${fd}`);
    try {
      await o.release();
      assertEquals(await waitExits([fd], 60_000), [], "the pidfd names the process that exited");
    } finally {
      closeFd(fd);
    }
    await o.ended();
  } finally {
    await o.close();
  }
});
