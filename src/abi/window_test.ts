import {
  checkWindow,
  effectiveTokens,
  formatLimit,
  formatWindow,
  parseLimit,
  parseWindow,
} from "./window.ts";
import { checkTable } from "../../tests/table.ts";
import { CtxError } from "./errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

Deno.test("window: accept/reject table (the issue's list and more)", () => {
  checkTable(parseWindow, formatWindow, {
    control: "window",
    accept: [
      ["auto\n", "auto"],
      ["1\n", 1],
      ["4096\n", 4096],
      ["4294967295\n", 4294967295],
    ],
    reject: [
      ["0\n", "EINVAL", `"0" is zero`],
      ["01\n", "EINVAL", `"01" has a leading zero`],
      ["+1\n", "EINVAL", `"+1" has a sign`],
      [" 1\n", "EINVAL", `" 1" has whitespace`],
      ["1 \n", "EINVAL", `"1 " has whitespace`],
      ["1\t\n", "EINVAL", "has whitespace"],
      ["1", "EINVAL", `"1" must end with a newline`],
      ["1\n\n", "EINVAL", "has extra lines"],
      ["1\n2\n", "EINVAL", "has extra lines"],
      ["4294967296\n", "EINVAL", `"4294967296" is larger than 4294967295`],
      ["99999999999999999999\n", "EINVAL", "is larger than 4294967295"],
      ["auto", "EINVAL", `"auto" must end with a newline`],
      ["AUTO\n", "EINVAL", `"AUTO" is not "auto" or a positive number`],
      ["-1\n", "EINVAL", `"-1" has a sign`],
      ["", "EINVAL", "missing value"],
      ["\n", "EINVAL", "missing value"],
      ["1\r\n", "EINVAL", "carriage return"],
      ["1.5\n", "EINVAL", "is not a base-10 number"],
      ["0x10\n", "EINVAL", "is not a base-10 number"],
      ["1e3\n", "EINVAL", "is not a base-10 number"],
      ["１\n", "EINVAL", "is not a base-10 number"],
      ["\0\n", "EINVAL", "NUL"],
      ["1".repeat(70000) + "\n", "EMSGSIZE", "over the 65536 byte limit"],
    ],
  });
});

Deno.test("limit: accept/reject table", () => {
  checkTable(parseLimit, formatLimit, {
    control: "limit",
    accept: [
      ["unknown\n", "unknown"],
      ["131072\n", 131072],
      ["4294967295\n", 4294967295],
    ],
    reject: [
      ["0\n", "EINVAL", "is zero"],
      ["unknown", "EINVAL", "must end with a newline"],
      ["Unknown\n", "EINVAL", `is not "unknown" or a positive number`],
      ["auto\n", "EINVAL", `is not "unknown" or a positive number`],
      ["0131072\n", "EINVAL", "leading zero"],
      ["4294967296\n", "EINVAL", "larger than"],
      ["1\n\n", "EINVAL", "extra lines"],
      ["", "EINVAL", "missing value"],
    ],
  });
});

Deno.test("checkWindow() accepts auto and fitting numbers, rejects too large or unknown limits", () => {
  checkWindow("auto", "unknown");
  checkWindow(4096, 4096);
  checkWindow(1, 131072);
  const big = assertThrows(() => checkWindow(5000, 4096, "debug/echo"), CtxError);
  assertEquals([big.errno, big.message], [
    "EINVAL",
    "window 5000 is larger than the limit 4096 of debug/echo",
  ]);
  const unknown = assertThrows(() => checkWindow(1, "unknown", "x/y"), CtxError);
  assertEquals([unknown.errno, unknown.message], [
    "EINVAL",
    "window 1 needs a known limit, but x/y has limit unknown",
  ]);
});

Deno.test("effectiveTokens(): auto follows the limit, explicit numbers stay, ineligible throws", () => {
  assertEquals(effectiveTokens("auto", 131072), 131072);
  assertEquals(effectiveTokens("auto", "unknown"), undefined);
  assertEquals(effectiveTokens(4096, 131072), 4096);
  assertEquals(assertThrows(() => effectiveTokens(4096, 1024), CtxError).errno, "EINVAL");
  assertEquals(assertThrows(() => effectiveTokens(4096, "unknown"), CtxError).errno, "EINVAL");
});
