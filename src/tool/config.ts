/** tsh's cache settings: `tool/tsh.d/config` (data, `key=value` lines) and the CTX_TOOL_CACHE override. */
import { CtxError } from "../abi/errno.ts";
import {
  CACHE_MAX,
  CACHE_MIN,
  parseTshConfig,
  TSH_DEFAULTS,
  type TshConfig,
} from "../abi/tshconfig.ts";

export { CACHE_MAX, CACHE_MIN, parseTshConfig, TSH_DEFAULTS, type TshConfig };

/** Reads `<root>/tool/tsh.d/config` now (no cache); an absent file means the defaults. */
export function readTshConfig(root: string): TshConfig {
  const path = `${root.replace(/\/$/, "")}/tool/tsh.d/config`;
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { ...TSH_DEFAULTS };
    throw new CtxError("EIO", `cannot read ${path}: ${e}`);
  }
  return parseTshConfig(text);
}

/** CTX_TOOL_CACHE: an integer clamped to 1..1024; undefined when unset; anything else EINVAL. */
export function toolCache(value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  if (!/^-?[0-9]+$/.test(value)) {
    throw new CtxError("EINVAL", `CTX_TOOL_CACHE=${JSON.stringify(value)} is not an integer`);
  }
  return Math.min(CACHE_MAX, Math.max(CACHE_MIN, Number(value)));
}

/** The eviction bounds: capacity (CTX_TOOL_CACHE wins over cache_capacity) and the hard max. */
export function cacheBounds(
  config: TshConfig,
  override?: number,
): { capacity: number; max: number } {
  return { capacity: override ?? config.cache_capacity, max: config.max_loaded_tools };
}
