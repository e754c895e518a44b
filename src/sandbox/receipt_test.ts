/** pinProcess(): a pidfd opened first and the receipt checked after, so the fd names the recorded process or is closed again. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { orphan, pidfdsSince } from "../../tests/fixture/proc.ts";
import { closeFd } from "../sys/sock.ts";
import { waitExits } from "../sys/wait.ts";
import { pinProcess } from "./receipt.ts";

Deno.test("pinProcess() gives a pidfd when the receipt matches after the open, else stale with the fd closed again", async () => {
  const o = await orphan();
  const left = pidfdsSince([o.pid]);
  try {
    let checked = 0;
    assertEquals(pinProcess(o.pid, () => (checked++, false)), "stale");
    assertEquals([checked, left()], [1, []]);
    const fd = pinProcess(o.pid, () => left().length > 0); // checked after the open
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
