/** A small JSON-Schema subset validator for tool input (`.d/schema`): type, properties, required, additionalProperties, enum, bounds, items; other keywords are refused. */
import { CtxError } from "../abi/errno.ts";

type Schema = Record<string, unknown>;

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function fail(at: string, why: string): never {
  throw new CtxError("EINVAL", `input ${at} ${why}`);
}

/** The keywords this validator enforces, and the JSON type each one's value must have. */
const ENFORCED: Record<string, string> = {
  type: "string",
  properties: "object",
  required: "array",
  additionalProperties: "boolean",
  enum: "array",
  minimum: "number",
  maximum: "number",
  minLength: "number",
  maxLength: "number",
  items: "object",
};

/** Annotations: accepted and ignored, since they constrain nothing (the built-ins' `description`). */
const ANNOTATIONS = new Set(["description", "title", "$comment", "$schema", "default", "examples"]);

const TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);

/**
 * Throws CtxError EINVAL for a schema this validator cannot enforce as written: a keyword outside
 * the subset (`pattern`, `anyOf`, a `$ref`...) or one of the wrong shape. Ignoring it would let
 * through input the schema's author meant to refuse, so the call fails closed.
 */
function checkSchema(schema: Schema, at: string): void {
  const bad = (why: string) => {
    throw new CtxError("EINVAL", `tool schema ${at} ${why}`);
  };
  for (const [k, v] of Object.entries(schema)) {
    if (ANNOTATIONS.has(k)) continue;
    if (!Object.hasOwn(ENFORCED, k)) bad(`has the unsupported keyword "${k}"`);
    if (typeOf(v) !== ENFORCED[k] && !(ENFORCED[k] === "number" && typeOf(v) === "integer")) {
      bad(`"${k}" is ${typeOf(v)}, expected ${ENFORCED[k]}`);
    }
  }
  if (schema.type !== undefined && !TYPES.has(schema.type as string)) {
    bad(`"type" ${JSON.stringify(schema.type)} is not a JSON type`);
  }
  if ((schema.required as unknown[] | undefined)?.some((k) => typeof k !== "string")) {
    bad(`"required" holds a non-string`);
  }
  for (const [k, v] of Object.entries((schema.properties ?? {}) as Record<string, unknown>)) {
    if (typeOf(v) !== "object") bad(`property "${k}" is not a schema object`);
    checkSchema(v as Schema, `${at}.properties.${k}`);
  }
  if (schema.items !== undefined) checkSchema(schema.items as Schema, `${at}.items`);
}

/**
 * Throws CtxError EINVAL naming the first rule `value` breaks, or the first part of `schema` outside
 * the subset (unknown keywords are refused; annotations such as `description` are ignored).
 */
export function validate(value: unknown, schema: Schema): void {
  checkSchema(schema, "$");
  check(value, schema, "$");
}

function check(value: unknown, schema: Schema, at: string): void {
  const t = schema.type;
  if (typeof t === "string") {
    const actual = typeOf(value);
    const ok = actual === t || (t === "number" && actual === "integer");
    if (!ok) fail(at, `is ${actual}, expected ${t}`);
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) {
    fail(at, `is ${JSON.stringify(value)}, not one of ${JSON.stringify(schema.enum)}`);
  }
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) {
      fail(at, `is ${value}, below the minimum ${schema.minimum}`);
    }
    if (typeof schema.maximum === "number" && value > schema.maximum) {
      fail(at, `is ${value}, above the maximum ${schema.maximum}`);
    }
  }
  if (typeof value === "string") {
    if (typeof schema.minLength === "number" && value.length < schema.minLength) {
      fail(at, `is shorter than ${schema.minLength}`);
    }
    if (typeof schema.maxLength === "number" && value.length > schema.maxLength) {
      fail(at, `is longer than ${schema.maxLength}`);
    }
  }
  if (Array.isArray(value) && schema.items && typeof schema.items === "object") {
    value.forEach((v, i) => check(v, schema.items as Schema, `${at}[${i}]`));
  }
  if (typeOf(value) === "object") {
    const obj = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const k of (schema.required ?? []) as string[]) {
      if (!Object.hasOwn(obj, k)) fail(at, `is missing the required property "${k}"`);
    }
    for (const [k, v] of Object.entries(obj)) {
      if (Object.hasOwn(props, k)) check(v, props[k], `${at}.${k}`);
      else if (schema.additionalProperties === false) fail(at, `has the unknown property "${k}"`);
    }
  }
}

/**
 * Turns tsh arguments into tool input: one JSON object argument is taken as is; otherwise
 * `--key value` sets an optional property and positional words fill the required properties in
 * order, the last one taking the remaining words joined by spaces. Values are coerced to the
 * schema's integer/number/boolean types.
 */
export function argsToInput(args: string[], schema: Schema): Record<string, unknown> {
  if (args.length === 1 && args[0].trimStart().startsWith("{")) {
    try {
      return JSON.parse(args[0]);
    } catch (e) {
      throw new CtxError("EINVAL", `input is not valid JSON: ${(e as Error).message}`);
    }
  }
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  const required = (schema.required ?? []) as string[];
  const out: Record<string, unknown> = {};
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (
      a.startsWith("--") && a.length > 2 && Object.hasOwn(props, a.slice(2)) && i + 1 < args.length
    ) {
      out[a.slice(2)] = coerce(args[++i], props[a.slice(2)]);
    } else words.push(a);
  }
  const slots = required.filter((k) => !Object.hasOwn(out, k));
  slots.forEach((k, i) => {
    if (i >= words.length) return;
    const v = i === slots.length - 1 ? words.slice(i).join(" ") : words[i];
    out[k] = coerce(v, props[k] ?? {});
  });
  if (words.length > slots.length && slots.length === 0) {
    throw new CtxError("EINVAL", `unexpected argument "${words[0]}"`);
  }
  return out;
}

function coerce(v: string, s: Schema): unknown {
  if ((s.type === "integer" || s.type === "number") && /^-?\d+(\.\d+)?$/.test(v)) return Number(v);
  if (s.type === "boolean" && (v === "true" || v === "false")) return v === "true";
  return v;
}
