import { DEFAULT_RLIMITS, effectiveRlimits, formatRlimit, parseRlimit } from "./rlimit.ts";
import { CtxError } from "./errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

Deno.test("parseRlimit() accepts lowered limits and round-trips them canonically", () => {
  assertEquals(parseRlimit(""), {});
  assertEquals(parseRlimit("cpu 10\n# fewer processes\nnproc 64\n"), { nproc: 64, cpu: 10 });
  assertEquals(formatRlimit({ cpu: 10, nproc: 64 }), "nproc 64\ncpu 10\n");
  assertEquals(effectiveRlimits({ nproc: 8 }), { ...DEFAULT_RLIMITS, nproc: 8 });
});

Deno.test("parseRlimit() rejects raising, zero, repeats, unknown names and loose syntax (EINVAL)", () => {
  for (
    const bad of [
      `nproc ${DEFAULT_RLIMITS.nproc + 1}\n`,
      "nproc 0\n",
      "nproc 64\nnproc 32\n",
      "stack 8\n",
      "nproc  64\n",
      "nproc 64",
      "nproc 064\n",
    ]
  ) {
    const e = assertThrows(() => parseRlimit(bad), CtxError);
    assertEquals(e.errno, "EINVAL", bad);
  }
});
