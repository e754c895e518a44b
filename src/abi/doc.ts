/** Document controls: prompt text (`system.md`, `prompt.template.md`, `description`) and JSON objects. */
import { checkSize, invalid } from "./text.ts";

/** UTF-8 prompt text: any text without NUL, at most 64 KiB; the empty file is empty text. */
function text(control: string) {
  return (t: string): string => {
    checkSize(control, t);
    return t;
  };
}

/** Parses `system.md`: persona and instructions (prompt text; grants nothing). */
export const parseSystem: (t: string) => string = text("system.md");

/** Parses `prompt.template.md`: the first system message template (`{{var}}` placeholders). */
export const parseTemplate: (t: string) => string = text("prompt.template.md");

/** Serializes a text control: the text itself. */
export function formatText(t: string): string {
  return t;
}

/** Parses a tool's `description`: non-blank text without NUL, at most 64 KiB. */
export function parseDescription(t: string): string {
  checkSize("description", t);
  if (t.trim() === "") throw invalid("description", "is empty");
  return t;
}

/** A JSON object value. */
export type JsonObject = Record<string, unknown>;

/** Parses a file holding exactly one JSON object (surrounding whitespace allowed). */
function object(control: string) {
  return (t: string): JsonObject => {
    checkSize(control, t);
    let v: unknown;
    try {
      v = JSON.parse(t);
    } catch (e) {
      throw invalid(control, `is not JSON (${e instanceof Error ? e.message : e})`);
    }
    // A plain check, not zod: this module is in tsh's sandbox bundle, where zod costs ~70 ms a call.
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      const kind = v === null ? "null" : Array.isArray(v) ? "an array" : `a ${typeof v}`;
      throw invalid(control, `is ${kind}, not a JSON object`);
    }
    return v as JsonObject;
  };
}

/** Parses `meta.json`: free-form descriptive JSON object (policy never depends on it). */
export const parseMeta: (t: string) => JsonObject = object("meta.json");

/** Parses a tool's `schema`: the JSON Schema (a JSON object) of its input; it grants nothing. */
export const parseSchema: (t: string) => JsonObject = object("schema");

/** Serializes a JSON object control: two-space indented, final newline. */
export function formatJson(v: JsonObject): string {
  return JSON.stringify(v, null, 2) + "\n";
}
