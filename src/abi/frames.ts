/** Agent socket frames: the JSONL requests a client sends and the frames the runtime streams back. */
import { z } from "zod";
import { isErrno } from "./errno.ts";
import { encodeFrame, MAX_FRAME } from "./line.ts";
import { isName, NAME_TEXT } from "./names.ts";

// The line format itself has no schema: clients that only write and read lines import line.ts.
export { encodeFrame, MAX_FRAME };

/** A session name: one name component (the object-name grammar), and never `index`. */
export const sessionName = z.string().refine((s) => isName(s) && s !== "index", {
  message: `session must match ${NAME_TEXT}, not end in .sock/.d, not be index`,
});

// Client request ids: printable ASCII without spaces, bounded so the index stays small.
const requestId = z.string().regex(/^[\x21-\x7e]{1,128}$/, {
  message: "id must be 1-128 printable ASCII characters without spaces",
});

/** Session scopes: private (default, resumable), shared, temp (never listed for resume). */
export const scope = z.enum(["private", "shared", "temp"]);
/** A session scope name. */
export type Scope = z.infer<typeof scope>;

/** `send`: one user message starts one run. */
export const sendOp = z.object({
  op: z.literal("send"),
  id: requestId,
  /** `null`: the scope's `index/current`, else `default` (resolved by the runtime). */
  session: sessionName.nullable().default("default"),
  scope: scope.default("private"),
  cwd: z.string().startsWith("/").max(4096).optional(),
  input: z.string(),
});

/** `tsh`: one tool-shell command through the authority path, no model call. */
export const tshOp = z.object({
  op: z.literal("tsh"),
  id: requestId,
  /** `null`: the private `index/current`, else `default`. */
  session: sessionName.nullable().default("default"),
  args: z.array(z.string().max(65536)).max(256),
});

/** `resume`: the durable history of a private or shared session. */
export const resumeOp = z.object({
  op: z.literal("resume"),
  /** `null`: the private `index/current`, else `default`. */
  session: sessionName.nullable().default("default"),
});

/** `cancel`: stop an active run by run id. */
export const cancelOp = z.object({
  op: z.literal("cancel"),
  id: z.string().regex(/^[\x21-\x7e]{1,128}$/),
});

/** `approve`: the one answer to an approval_request; exactly these four keys. */
export const approveOp = z.strictObject({
  op: z.literal("approve"),
  run: z.string().max(128),
  id: z.string().max(128),
  decision: z.enum(["allow_once", "deny"]),
});

/** Every request, discriminated by `op`. Unknown fields are ignored (except on approve). */
export const request = z.discriminatedUnion("op", [sendOp, tshOp, resumeOp, cancelOp, approveOp]);
/** A validated request frame. */
export type Request = z.infer<typeof request>;
/** The op names the socket accepts. */
export const OPS = ["send", "tsh", "resume", "cancel", "approve"] as const;

// --- frames the server writes ----------------------------------------------------------------
// One zod schema per frame: the TypeScript types below are inferred from them, and the tests'
// clients validate every frame they receive with the same schemas (strict: no stray field).

/** A text content part as stored in messages and message frames. */
export const textPart = z.strictObject({ type: z.literal("text"), text: z.string() });
/** A text content part. */
export type TextPart = z.infer<typeof textPart>;
/** A tool result content part (reference wire shape of S1's tool_result). */
export const toolResultPart = z.strictObject({
  type: z.literal("tool_result"),
  tool_call_id: z.string(),
  content: z.string(),
  status: z.enum(["ok", "error"]).optional(),
  errno: z.string().optional(),
  truncated: z.boolean().optional(),
});
/** A tool result content part. */
export type ToolResultPart = z.infer<typeof toolResultPart>;

/**
 * The `tool_result` frame `tsh --json` prints in its sandbox (spec/tool-policy.md); the daemon
 * parses it with this, as anything the sandbox writes.
 */
export const tshToolResult = z.strictObject({
  type: z.literal("tool_result"),
  name: z.string(),
  status: z.enum(["ok", "error"]),
  errno: z.string().refine(isErrno, { message: "errno is not an errno name" }).optional(),
  exitCode: z.number().int(),
  content: z.string(),
  truncated: z.boolean(),
});

/** Final status of a run. */
export const runStatus = z.enum(["ok", "error", "cancelled"]);
/** Final status of a run. */
export type RunStatus = z.infer<typeof runStatus>;

const run = z.string();
/** Arguments as the model or agent gave them (any JSON value). */
const args = z.unknown();

/**
 * A run frame's schema: its fields, plus `replay: true` on a wire copy sent to a connection that
 * joined a run it did not start (an idempotent resend or a follower; events.jsonl never has it).
 */
function runFrame<S extends z.ZodRawShape>(shape: S) {
  return z.strictObject({ ...shape, replay: z.literal(true).optional() });
}

/** `error`: a run's (with `run`), a request's (with `id`) or the connection's (neither). */
export const errorFrame = runFrame({
  type: z.literal("error"),
  run: run.optional(),
  id: z.string().optional(),
  code: z.string(),
  message: z.string(),
  tool: z.string().optional(),
  /** The fallback candidate this error is about (with `recoverable`: the run goes on). */
  model: z.string().optional(),
  /** A non-terminal error: the run continues (a failed fallback candidate). */
  recoverable: z.literal(true).optional(),
});
/** An error frame. */
export type ErrorFrame = z.infer<typeof errorFrame>;

/** Frames the runtime writes to events.jsonl and streams to clients, discriminated by `type`. */
export const frame = z.union([
  runFrame({
    type: z.literal("start"),
    id: z.string(),
    run,
    client_id: z.string(),
    op: z.enum(["send", "tsh"]),
    session: z.string(),
    scope,
    cwd: z.string(),
    digest: z.string(),
    ts: z.number(),
  }),
  runFrame({ type: z.literal("delta"), run, text: z.string() }),
  /** The model's reasoning text, streamed as the provider sends it; never part of the answer. */
  runFrame({ type: z.literal("reasoning_delta"), run, text: z.string() }),
  runFrame({
    type: z.literal("message"),
    run,
    role: z.literal("assistant"),
    content: z.array(textPart),
    truncated: z.literal(true).optional(),
  }),
  runFrame({
    type: z.literal("message"),
    run,
    role: z.literal("tool"),
    name: z.string(),
    arguments: args,
    content: z.array(toolResultPart),
  }),
  runFrame({
    type: z.literal("tool_call"),
    run,
    id: z.string(),
    name: z.string(),
    arguments: args,
  }),
  runFrame({
    type: z.literal("approval_request"),
    run,
    id: z.string(),
    name: z.string(),
    args: z.array(z.string()),
  }),
  runFrame({
    type: z.literal("approval_result"),
    run,
    id: z.string(),
    name: z.string(),
    decision: z.enum(["allow_once", "deny"]),
    reason: z.string(),
  }),
  runFrame({
    type: z.literal("usage"),
    run,
    input_tokens: z.number(),
    output_tokens: z.number(),
    /** Why the model turn ended: stop, length, tool_calls, content_filter, other. */
    stop: z.string().optional(),
  }),
  errorFrame,
  runFrame({ type: z.literal("cancel"), run, ts: z.number() }),
  runFrame({ type: z.literal("done"), run, status: runStatus, ts: z.number() }),
]);
/** A run frame. */
export type Frame = z.infer<typeof frame>;

/** Replies that are not part of a run's event stream. */
export const reply = z.union([
  z.strictObject({
    type: z.literal("ack"),
    op: z.literal("cancel"),
    run,
    status: z.union([runStatus, z.literal("active")]),
  }),
  z.strictObject({
    type: z.literal("status"),
    session: z.string(),
    scope,
    status: z.string(),
    runs: z.number(),
    updated_at: z.string(),
  }),
  z.strictObject({
    type: z.literal("history"),
    session: z.string(),
    role: z.enum(["user", "assistant", "tool"]),
    run,
    content: z.unknown(),
    truncated: z.literal(true).optional(),
  }),
]);
/** A reply frame. */
export type Reply = z.infer<typeof reply>;

/** The wire copy of a run frame for a connection that did not start the run (spec/socket.md). */
export function replayOf(f: Frame): Frame {
  return { ...f, replay: true };
}

/** Anything the server may write on a connection: what the tests' clients check each frame with. */
export const serverFrameStrict = z.union([frame, reply]);
/** Anything the server may write on a connection. */
export type ServerFrame = z.infer<typeof serverFrameStrict>;

/** A client-side view of a server frame: `type` known, the rest loosely typed. */
export const serverFrame = z.looseObject({ type: z.string(), run: z.string().optional() });

/**
 * The one way to build an error frame: errno name, the rule that failed, and where it belongs
 * (`run`, or the request `id`, or neither for the connection).
 */
export function errorOf(
  code: string,
  message: string,
  extra: Omit<ErrorFrame, "type" | "code" | "message"> = {},
): ErrorFrame {
  return { type: "error", code, message, ...extra };
}

/** Largest delta text (UTF-8 bytes) in one frame: longer output streams as several deltas. */
export const MAX_DELTA = 64 * 1024;

const enc = new TextEncoder();

/** Cuts `text` into pieces of at most `max` UTF-8 bytes, never inside a character. */
export function splitText(text: string, max: number): string[] {
  const bytes = enc.encode(text);
  if (bytes.length <= max) return [text];
  const dec = new TextDecoder();
  const out: string[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + max, bytes.length);
    while (end < bytes.length && end > start && (bytes[end] & 0xc0) === 0x80) end--;
    if (end === start) { // max is smaller than this one character: it goes whole
      end++;
      while (end < bytes.length && (bytes[end] & 0xc0) === 0x80) end++;
    }
    out.push(dec.decode(bytes.subarray(start, end)));
    start = end;
  }
  return out;
}

/**
 * Builds a frame around `text` so its JSONL line fits {@link MAX_FRAME}: when the whole text does
 * not fit it is cut on a character boundary and `build` is told so (the frame says `truncated`).
 */
export function fitFrame<F>(text: string, build: (text: string, truncated: boolean) => F): F {
  let frame = build(text, false);
  let over = enc.encode(encodeFrame(frame)).length - MAX_FRAME;
  let budget = enc.encode(text).length;
  while (over > 0) {
    // Each cut byte shortens the line by at least one (escapes by more): this converges.
    budget = Math.max(0, budget - over);
    const cut = budget > 0 ? splitText(text, budget)[0] : "";
    frame = build(enc.encode(cut).length <= budget ? cut : "", true);
    over = enc.encode(encodeFrame(frame)).length - MAX_FRAME;
  }
  return frame;
}
