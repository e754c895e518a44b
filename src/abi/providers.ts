/** Host provider configuration: one strict JSON file per provider in `providers.d/` (`<provider>.json`), the top of a model's `limit` precedence. */
import { CtxError } from "./errno.ts";
import { parseBaseURL } from "./model.ts";
import { invalid, MAX_CONTROL_BYTES, quote, U32_MAX } from "./text.ts";

/** The official endpoints of the wires that have one, used when a model's `default` names no `base_url` (openai-chat has none: every server differs). */
export const WIRE_URLS: Readonly<Record<string, string | undefined>> = {
  "openai-chat": undefined,
  "openai-responses": "https://api.openai.com/v1",
  "anthropic-messages": "https://api.anthropic.com/v1",
};

/** One provider's host configuration, as validated from `<dir>/<name>.json`. */
export interface ProviderConfig {
  /** The provider component of `model/<provider>/<model>` (the file's stem). */
  name: string;
  /** Base URL for the provider's models whose `default` names none. */
  base_url?: string;
  /** The provider's default native model id (checks `model_limits` keys only). */
  default_model?: string;
  /** Native model ids the provider serves (checks `model_limits` keys only). */
  models: string[];
  /** Combined context limits in tokens by native model id. */
  limits: Record<string, number>;
  /** False: the file is valid but contributes nothing. */
  enabled: boolean;
}

/** The keys a provider file may have; anything else is refused. */
export const PROVIDER_KEYS = [
  "name",
  "base_url",
  "default_model",
  "models",
  "model_limits",
  "enabled",
] as const;

/** Provider names: the secret store's rule (src/model/secret.ts), so a key and a config name match. */
const PROVIDER = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** Native model ids: the `id` control's rule. */
const MODEL_ID = /^[\x21-\x7e]{1,256}$/;

const enc = new TextEncoder();

/** Keys that are known elsewhere but not here, with what to do instead. */
const UNSUPPORTED: Record<string, string> = {
  formats: "the model's driver control picks the wire format",
  oauth: "keys come from `ctx provider set`",
};

/** The provider name a file name gives (`openai.json` → `openai`), or null for names that are not provider files. */
export function providerOfFile(file: string): string | null {
  if (!file.endsWith(".json")) return null;
  const stem = file.slice(0, -5);
  return PROVIDER.test(stem) ? stem : null;
}

/**
 * Parses one provider file `file` (`<provider>.json`): a JSON object with only
 * {@link PROVIDER_KEYS}; `name`, when given, equal to the stem; `model_limits` keys listed in
 * `models` or equal to `default_model`, values 1..4294967295. EINVAL (EMSGSIZE over 64 KiB)
 * naming the file and the rule otherwise.
 */
export function parseProvider(text: string, file: string): ProviderConfig {
  const label = file;
  const name = providerOfFile(file);
  if (name === null) {
    throw invalid(
      label,
      `the file name must be <provider>.json with <provider> [a-z0-9][a-z0-9._-]*`,
    );
  }
  const n = enc.encode(text).length;
  if (n > MAX_CONTROL_BYTES) {
    throw new CtxError(
      "EMSGSIZE",
      `"${label}": ${n} bytes is over the ${MAX_CONTROL_BYTES} byte limit`,
    );
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw invalid(label, `not JSON: ${(e as Error).message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw invalid(label, "not a JSON object");
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (Object.hasOwn(UNSUPPORTED, k)) {
      throw invalid(label, `${quote(k)} is not supported (${UNSUPPORTED[k]})`);
    }
    if (!(PROVIDER_KEYS as readonly string[]).includes(k)) {
      throw invalid(label, `unknown key ${quote(k)} (keys: ${PROVIDER_KEYS.join(", ")})`);
    }
  }
  if (o.name !== undefined && o.name !== name) {
    throw invalid(
      label,
      `"name" ${JSON.stringify(o.name)} is not the file's provider ${quote(name)}`,
    );
  }
  const str = (k: string): string | undefined => {
    if (o[k] === undefined) return undefined;
    if (typeof o[k] !== "string") throw invalid(label, `${quote(k)} must be a string`);
    return o[k] as string;
  };
  const id = (value: unknown, at: string): string => {
    if (typeof value !== "string" || !MODEL_ID.test(value)) {
      throw invalid(
        label,
        `${at} ${JSON.stringify(value)} is not 1-256 printable ASCII characters without spaces`,
      );
    }
    return value;
  };
  const base = str("base_url");
  const out: ProviderConfig = {
    name,
    models: [],
    limits: {},
    enabled: true,
  };
  if (base !== undefined) out.base_url = parseBaseURL(base, { control: label, at: `"base_url"` });
  if (o.default_model !== undefined) out.default_model = id(o.default_model, `"default_model"`);
  if (o.models !== undefined) {
    if (!Array.isArray(o.models)) throw invalid(label, `"models" must be an array of model ids`);
    for (const [i, m] of o.models.entries()) {
      const m2 = id(m, `"models"[${i}]`);
      if (out.models.includes(m2)) throw invalid(label, `"models" lists ${quote(m2)} twice`);
      out.models.push(m2);
    }
  }
  if (o.model_limits !== undefined) {
    const ml = o.model_limits;
    if (!ml || typeof ml !== "object" || Array.isArray(ml)) {
      throw invalid(label, `"model_limits" must be an object of model id -> token count`);
    }
    for (const [k, limit] of Object.entries(ml as Record<string, unknown>)) {
      id(k, `"model_limits" key`);
      if (k !== out.default_model && !out.models.includes(k)) {
        throw invalid(
          label,
          `"model_limits" names ${quote(k)}, which is not default_model or in models`,
        );
      }
      if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > U32_MAX) {
        throw invalid(
          label,
          `"model_limits" ${quote(k)}: ${JSON.stringify(limit)} is not a token count 1..${U32_MAX}`,
        );
      }
      out.limits[k] = limit;
    }
  }
  if (o.enabled !== undefined) {
    if (typeof o.enabled !== "boolean") throw invalid(label, `"enabled" must be true or false`);
    out.enabled = o.enabled;
  }
  return out;
}
