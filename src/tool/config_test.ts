/** tool/tsh.d/config and CTX_TOOL_CACHE: data only, strict, clamped. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { cacheBounds, parseTshConfig, readTshConfig, toolCache, TSH_DEFAULTS } from "./config.ts";

Deno.test("parseTshConfig() reads key=value lines, comments and blanks; absent keys keep defaults", () => {
  assertEquals(parseTshConfig("# tsh\n\nmax_loaded_tools=8\ncache_capacity=3\n"), {
    max_loaded_tools: 8,
    cache_capacity: 3,
    window_percent: 1,
  });
  assertEquals(parseTshConfig(""), TSH_DEFAULTS);
});

Deno.test("parseTshConfig() refuses unknown keys, repeats, non-canonical and out-of-range values", () => {
  const bad: [string, string][] = [
    ["cache=3\n", 'unknown key "cache"'],
    ["cache_capacity=3\ncache_capacity=4\n", "repeats"],
    ["cache_capacity=03\n", "is not an integer 1..1024"],
    ["cache_capacity=0\n", "is not an integer 1..1024"],
    ["cache_capacity=2000\n", "is not an integer 1..1024"],
    ["window_percent=101\n", "is not an integer 0..100"],
    ["export cache_capacity=3\n", "is not key=value"],
  ];
  for (const [text, why] of bad) {
    const e = assertThrows(() => parseTshConfig(text), CtxError);
    assertEquals([e.errno, e.message.includes(why)], ["EINVAL", true], e.message);
  }
});

Deno.test("toolCache() clamps CTX_TOOL_CACHE to 1..1024 and refuses non-integers", () => {
  assertEquals(
    [
      toolCache(undefined),
      toolCache(""),
      toolCache("0"),
      toolCache("-5"),
      toolCache("7"),
      toolCache("5000"),
    ],
    [undefined, undefined, 1, 1, 7, 1024],
  );
  assertEquals(assertThrows(() => toolCache("lots"), CtxError).errno, "EINVAL");
  assertEquals(cacheBounds(TSH_DEFAULTS, 5), { capacity: 5, max: 64 });
  assertEquals(cacheBounds(TSH_DEFAULTS), { capacity: 32, max: 64 });
});

Deno.test("readTshConfig() reads <root>/tool/tsh.d/config fresh; absent means defaults", async () => {
  const root = await Deno.makeTempDir();
  try {
    assertEquals(readTshConfig(root), TSH_DEFAULTS);
    Deno.mkdirSync(`${root}/tool/tsh.d`, { recursive: true });
    Deno.writeTextFileSync(`${root}/tool/tsh.d/config`, "cache_capacity=2\n");
    assertEquals(readTshConfig(root).cache_capacity, 2);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
