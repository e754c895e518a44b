/** sdk-envelope-v1: the one stdin object of an executable agent step, and the frames it may print. */
import { z } from "zod";
import { NAME_GRAMMAR } from "./names.ts";

/** The schema name carried in every invocation. */
export const ENVELOPE_SCHEMA = "cortexfs.agent-invocation/v1";
/** The stdin body limit, trailing newline included. */
export const MAX_ENVELOPE = 1024 * 1024;
/** Each context string (input, history_messages, tool_context). */
export const MAX_CONTEXT = 64 * 1024;
/** Observation content. */
export const MAX_OBSERVATION = 16 * 1024;
/** Tool calls per logical run. */
export const MAX_CALLS = 8;
/** Process starts per logical run. */
export const MAX_STARTS = 9;

const ctxString = z.string().refine((s) => utf8Length(s) <= MAX_CONTEXT, {
  message: `context strings are at most ${MAX_CONTEXT} bytes`,
});

/** The authoritative result of the preceding yielded call. */
export const observation = z.strictObject({
  tool_call_id: z.string(),
  name: z.string(),
  status: z.enum(["ok", "error"]),
  content: z.string().refine((s) => utf8Length(s) <= MAX_OBSERVATION, {
    message: `observation content is at most ${MAX_OBSERVATION} bytes`,
  }),
  truncated: z.boolean(),
});
/** An observation object. */
export type Observation = z.infer<typeof observation>;

/** The invocation: exactly these fields, no others. */
export const invocation = z.strictObject({
  schema: z.literal(ENVELOPE_SCHEMA),
  run: z.string(),
  step: z.number().int().min(0).max(MAX_STARTS - 1),
  input: ctxString,
  history_messages: ctxString,
  tool_context: ctxString,
  observation: observation.nullable(),
}).refine((v) => (v.step === 0) === (v.observation === null), {
  message: "step 0 has observation null; later steps carry the preceding result",
});
/** A validated invocation. */
export type Invocation = z.infer<typeof invocation>;

/** Encodes an invocation as the exact stdin bytes; throws when it breaks a bound. */
export function encodeInvocation(v: Invocation): Uint8Array {
  const parsed = invocation.parse(v);
  const bytes = new TextEncoder().encode(JSON.stringify(parsed) + "\n");
  if (bytes.length > MAX_ENVELOPE) throw new RangeError(`envelope is ${bytes.length} bytes`);
  return bytes;
}

const textPart = z.strictObject({ type: z.literal("text"), text: z.string() });

/** What an agent step may print on stdout, one JSON object per line. */
export const agentFrame = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("delta"), text: z.string() }),
  z.strictObject({
    type: z.literal("message"),
    role: z.literal("assistant"),
    content: z.union([z.string(), z.array(textPart)]),
  }),
  z.strictObject({
    type: z.literal("tool_call"),
    id: z.string().regex(/^[\x21-\x7e]{1,128}$/),
    name: z.string().regex(NAME_GRAMMAR),
    arguments: z.record(z.string(), z.unknown()),
  }),
  z.strictObject({
    type: z.literal("error"),
    code: z.string().regex(/^E[A-Z0-9]{1,15}$/),
    message: z.string().max(4096),
  }),
]);
/** A validated agent stdout frame. */
export type AgentFrame = z.infer<typeof agentFrame>;

/** UTF-8 byte length of a string. */
export function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

/** Cuts a string to at most `max` UTF-8 bytes on a character boundary. */
export function clampUtf8(s: string, max: number): { text: string; truncated: boolean } {
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= max) return { text: s, truncated: false };
  let end = max;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // back off a continuation byte
  return { text: new TextDecoder().decode(bytes.subarray(0, end)), truncated: true };
}
