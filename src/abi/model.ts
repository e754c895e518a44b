/** Model-facing controls: the agent's `model` reference, and a model's `driver`, `cap`, `fallback`. */
import { nameFault } from "./names.ts";
import { invalid, joinLines, listLines, noDuplicate, quote, singleLine } from "./text.ts";

/** Parses the agent's `model`: `<provider>/<model>` or an alias name such as `main`. */
export function parseModelRef(text: string): string {
  const v = singleLine("model", text);
  const fault = nameFault(v, "model");
  if (fault) throw invalid("model", `model reference ${quote(v)} ${fault}`);
  return v;
}

/** Serializes the agent's `model`. */
export function formatModelRef(ref: string): string {
  return `${ref}\n`;
}

/** Use cases a driver route table can name; lookup tries the use case, then `default`. */
export const DRIVER_KEYS = ["default", "exec", "socket", "agent"] as const;

/** One driver use case. */
export type DriverKey = typeof DRIVER_KEYS[number];

/** A driver route table: adapter names in priority order per use case. */
export type Driver = Partial<Record<DriverKey, string[]>>;

const ADAPTER = /^[a-z0-9][a-z0-9._-]{0,63}$/;

function adapter(name: string, at: string): string {
  if (!ADAPTER.test(name)) {
    throw invalid("driver", `${at}: adapter ${quote(name)} is not [a-z0-9][a-z0-9._-]*`);
  }
  return name;
}

/**
 * Parses `driver`: a single legacy adapter name line (= `default=<name>`), or `key=a,b` lines with
 * distinct keys from default/exec/socket/agent and distinct adapters per key.
 */
export function parseDriver(text: string): Driver {
  const lines = listLines("driver", text);
  if (lines.length === 0) throw invalid("driver", "missing value (the file is empty)");
  if (lines.length === 1 && !lines[0].text.includes("=")) {
    return { default: [adapter(lines[0].text, "line 1")] };
  }
  const out: Driver = {};
  for (const { no, text: line } of lines) {
    const at = `line ${no}`;
    const eq = line.indexOf("=");
    if (eq < 0) throw invalid("driver", `${at} ${quote(line)} is not key=adapter,adapter`);
    const key = line.slice(0, eq);
    if (!(DRIVER_KEYS as readonly string[]).includes(key)) {
      throw invalid("driver", `${at}: key ${quote(key)} is not one of ${DRIVER_KEYS.join(", ")}`);
    }
    if (Object.hasOwn(out, key)) throw invalid("driver", `${at}: key ${quote(key)} repeats`);
    const seen = new Set<string>();
    out[key as DriverKey] = line.slice(eq + 1).split(",").map((a) => {
      adapter(a, at);
      if (seen.has(a)) throw invalid("driver", `${at}: adapter ${quote(a)} repeats`);
      seen.add(a);
      return a;
    });
  }
  return out;
}

/** Serializes `driver`: the legacy one-name form when only `default` with one adapter is set. */
export function formatDriver(d: Driver): string {
  const keys = DRIVER_KEYS.filter((k) => d[k] !== undefined);
  if (keys.length === 1 && keys[0] === "default" && d.default?.length === 1) {
    return `${d.default[0]}\n`;
  }
  return joinLines(keys.map((k) => `${k}=${(d[k] ?? []).join(",")}`));
}

/** The adapters for a use case: its own list, else `default`, else none. */
export function routeFor(d: Driver, use: DriverKey): string[] {
  return d[use] ?? d.default ?? [];
}

/** Stable, provider-neutral capability words. */
export const CAP_WORDS = [
  "chat",
  "stream",
  "session",
  "vision",
  "audio_input",
  "audio_output",
  "json_schema",
  "tool_call_syntax",
  "reasoning",
  "embedding",
  "rerank",
  "image_input",
  "image_output",
  "video_input",
  "video_output",
  "pdf_input",
  "pdf_output",
  "attachment",
  "temperature",
  "interleaved",
] as const;

/** Words naming provider formats or native state: never valid in `cap`. */
export const FORBIDDEN_CAP_WORDS = [
  "openai_responses",
  "anthropic_messages",
  "gemini_generate_content",
  "native_thread",
  "native_stateful",
  "native_stateless",
] as const;

/** Parses a model's `cap`: stable words, one per line, distinct; provider-format words are rejected. */
export function parseCap(text: string): string[] {
  const seen = new Set<string>();
  return listLines("cap", text).map(({ no, text: line }) => {
    if ((FORBIDDEN_CAP_WORDS as readonly string[]).includes(line)) {
      throw invalid("cap", `line ${no}: ${quote(line)} is a provider-format word and is forbidden`);
    }
    if (!(CAP_WORDS as readonly string[]).includes(line)) {
      throw invalid("cap", `line ${no}: ${quote(line)} is not a stable cap word`);
    }
    noDuplicate("cap", seen, line, no);
    return line;
  });
}

/** Serializes a model's `cap`. */
export function formatCap(words: readonly string[]): string {
  return joinLines(words);
}

/**
 * Parses `fallback`: an ordered chain of `<provider>/<model>` references, one per line, distinct;
 * blank lines and `#` comments are skipped.
 */
export function parseFallback(text: string): string[] {
  const seen = new Set<string>();
  return listLines("fallback", text, { comments: true }).map(({ no, text: line }) => {
    const fault = nameFault(line, "model");
    if (fault) throw invalid("fallback", `line ${no}: model reference ${quote(line)} ${fault}`);
    if (!line.includes("/")) {
      throw invalid("fallback", `line ${no}: ${quote(line)} is not <provider>/<model>`);
    }
    noDuplicate("fallback", seen, line, no);
    return line;
  });
}

/** Serializes `fallback` (comments are not kept). */
export function formatFallback(refs: readonly string[]): string {
  return joinLines(refs);
}

/** A model's `id`: the provider's native model id (one line, printable ASCII, no whitespace). */
export function parseModelId(text: string): string {
  const v = singleLine("id", text);
  if (!/^[\x21-\x7e]{1,256}$/.test(v)) {
    throw invalid("id", `${quote(v)} is not 1-256 printable ASCII characters without spaces`);
  }
  return v;
}

/** Serializes a model's `id`. */
export function formatModelId(id: string): string {
  return `${id}\n`;
}

/**
 * A provider base URL (`default`'s `base_url`, a providers.d file's): http(s), no credentials,
 * query or hash; trailing slashes dropped. EINVAL `"<control>": <at>: ...` otherwise.
 */
export function parseBaseURL(value: string, o: { control: string; at: string }): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(o.control, `${o.at}: base_url ${quote(value)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(o.control, `${o.at}: base_url ${quote(value)} is not http(s)`);
  }
  if (url.username || url.password || url.search || url.hash) {
    throw invalid(
      o.control,
      `${o.at}: base_url ${quote(value)} has credentials, a query or a hash`,
    );
  }
  return value.replace(/\/+$/, "");
}

/** Keys of a model's `default` control; a secret is never one of them. */
export const DEFAULT_KEYS = ["base_url", "slot", "script"] as const;

const SLOT = /^[a-z0-9][a-z0-9._-]{0,63}$/;

function defaultValue(key: string, value: string, at: string): string {
  switch (key) {
    case "base_url":
      return parseBaseURL(value, { control: "default", at });
    case "slot":
      if (!SLOT.test(value)) {
        throw invalid("default", `${at}: slot ${quote(value)} is not [a-z0-9][a-z0-9._-]*`);
      }
      return value;
    case "script":
      if (
        value === "" || value.startsWith("/") ||
        value.split("/").some((c) => c === ".." || c === "")
      ) {
        throw invalid(
          "default",
          `${at}: script ${quote(value)} is not a relative path without ".."`,
        );
      }
      return value;
  }
  throw invalid("default", `${at}: key ${quote(key)} is not one of ${DEFAULT_KEYS.join(", ")}`);
}

/**
 * Parses a model's `default`: `key=value` lines with distinct keys from {@link DEFAULT_KEYS};
 * blank lines and `#` comments are skipped. `base_url` is an http(s) URL without credentials
 * (a trailing `/` dropped), `slot` a secret slot name, `script` a path relative to the agent home.
 */
export function parseDefaults(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { no, text: line } of listLines("default", text, { comments: true })) {
    const at = `line ${no}`;
    const eq = line.indexOf("=");
    if (eq <= 0) throw invalid("default", `${at} ${quote(line)} is not key=value`);
    const key = line.slice(0, eq);
    if (Object.hasOwn(out, key)) throw invalid("default", `${at}: key ${quote(key)} repeats`);
    out[key] = defaultValue(key, line.slice(eq + 1), at);
  }
  return out;
}

/** Serializes a model's `default` in {@link DEFAULT_KEYS} order. */
export function formatDefaults(d: Record<string, string>): string {
  return joinLines(DEFAULT_KEYS.filter((k) => d[k] !== undefined).map((k) => `${k}=${d[k]}`));
}
