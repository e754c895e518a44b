/** The format of `tool/tsh.d/config`: tsh's load/pin cache bounds (`key=value` data, never shell). */
import { CtxError } from "./errno.ts";

/** The settings `tool/tsh.d/config` accepts (spec-digest 6.3). */
export interface TshConfig {
  /** Hard bound on loaded entries, pinned ones included (a load past it is ENOSPC). */
  max_loaded_tools: number;
  /** Unpinned entries kept before least-recently-used eviction. */
  cache_capacity: number;
  /** W-TinyLFU admission window; validated and kept, eviction here is plain LRU. */
  window_percent: number;
}

/** The defaults (an absent file or key). */
export const TSH_DEFAULTS: Readonly<TshConfig> = {
  max_loaded_tools: 64,
  cache_capacity: 32,
  window_percent: 1,
};

/** The bounds CTX_TOOL_CACHE is clamped to. */
export const CACHE_MIN = 1, CACHE_MAX = 1024;

const RANGES: Record<keyof TshConfig, [number, number]> = {
  max_loaded_tools: [1, 65536],
  cache_capacity: [CACHE_MIN, CACHE_MAX],
  window_percent: [0, 100],
};

function invalid(reason: string): CtxError {
  return new CtxError("EINVAL", `"tool/tsh.d/config": ${reason}`);
}

/**
 * Parses the config: `key=value` lines of the three keys, `#` comments and blank lines allowed,
 * each key at most once, values canonical decimal integers in range. Anything else is EINVAL: the
 * file is data, never shell.
 */
export function parseTshConfig(text: string): TshConfig {
  const out: TshConfig = { ...TSH_DEFAULTS };
  const seen = new Set<string>();
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const m = /^([a-z_]+)=(.*)$/.exec(line);
    if (!m) throw invalid(`line ${i + 1} ${JSON.stringify(line)} is not key=value`);
    const [, key, value] = m;
    if (!Object.hasOwn(RANGES, key)) {
      throw invalid(`line ${i + 1}: unknown key "${key}" (${Object.keys(RANGES).join(", ")})`);
    }
    if (seen.has(key)) throw invalid(`line ${i + 1}: key "${key}" repeats`);
    seen.add(key);
    const [lo, hi] = RANGES[key as keyof TshConfig];
    if (!/^(0|[1-9][0-9]{0,8})$/.test(value) || Number(value) < lo || Number(value) > hi) {
      throw invalid(
        `line ${i + 1}: ${key}=${JSON.stringify(value)} is not an integer ${lo}..${hi}`,
      );
    }
    out[key as keyof TshConfig] = Number(value);
  });
  return out;
}
