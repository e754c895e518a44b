/** Agent socket frames: the JSONL requests a client sends and the frames the runtime streams back. */
import { z } from "zod";
import { isName, NAME_TEXT } from "./names.ts";

/** Largest frame in either direction, newline included (larger is EMSGSIZE). */
export const MAX_FRAME = 1024 * 1024;

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
  session: sessionName.default("default"),
  scope: scope.default("private"),
  cwd: z.string().startsWith("/").max(4096).optional(),
  input: z.string(),
});

/** `tsh`: one tool-shell command through the authority path, no model call. */
export const tshOp = z.object({
  op: z.literal("tsh"),
  id: requestId,
  session: sessionName.default("default"),
  args: z.array(z.string().max(65536)).max(256),
});

/** `resume`: the durable history of a private or shared session. */
export const resumeOp = z.object({
  op: z.literal("resume"),
  session: sessionName.default("default"),
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

/** A text content part as stored in messages and message frames. */
export interface TextPart {
  type: "text";
  text: string;
}
/** A tool result content part (reference wire shape of S1's tool_result). */
export interface ToolResultPart {
  type: "tool_result";
  tool_call_id: string;
  content: string;
  status?: "ok" | "error";
  errno?: string;
  truncated?: boolean;
}

/** Frames the runtime writes to events.jsonl and streams to clients, discriminated by `type`. */
export type Frame =
  | {
    type: "start";
    id: string;
    run: string;
    client_id: string;
    op: "send" | "tsh";
    session: string;
    scope: Scope;
    cwd: string;
    digest: string;
    ts: number;
  }
  | { type: "delta"; run: string; text: string }
  /** The model's reasoning text, streamed as the provider sends it; never part of the answer. */
  | { type: "reasoning_delta"; run: string; text: string }
  | { type: "message"; run: string; role: "assistant"; content: TextPart[]; truncated?: true }
  | {
    type: "message";
    run: string;
    role: "tool";
    name: string;
    arguments: unknown;
    content: ToolResultPart[];
  }
  | { type: "tool_call"; run: string; id: string; name: string; arguments: unknown }
  | { type: "approval_request"; run: string; id: string; name: string; args: string[] }
  | {
    type: "approval_result";
    run: string;
    id: string;
    name: string;
    decision: "allow_once" | "deny";
    reason: string;
  }
  | {
    type: "usage";
    run: string;
    input_tokens: number;
    output_tokens: number;
    /** Why the model turn ended: stop, length, tool_calls, content_filter, other. */
    stop?: string;
  }
  | {
    type: "error";
    run?: string;
    id?: string;
    code: string;
    message: string;
    tool?: string;
    /** The fallback candidate this error is about (with `recoverable`: the run goes on). */
    model?: string;
    /** A non-terminal error: the run continues (a failed fallback candidate). */
    recoverable?: true;
  }
  | { type: "cancel"; run: string; ts: number }
  | { type: "done"; run: string; status: RunStatus; ts: number };

/** Final status of a run. */
export type RunStatus = "ok" | "error" | "cancelled";

/** Replies that are not part of a run's event stream. */
export type Reply =
  | { type: "ack"; op: "cancel"; run: string; status: RunStatus | "active" }
  | {
    type: "status";
    session: string;
    scope: Scope;
    status: string;
    runs: number;
    updated_at: string;
  }
  | {
    type: "history";
    session: string;
    role: "user" | "assistant" | "tool";
    run: string;
    content: unknown;
    truncated?: true;
  };

/** Anything the server may write on a connection. */
export type ServerFrame = Frame | Reply;

/** A client-side view of a server frame: `type` known, the rest loosely typed. */
export const serverFrame = z.looseObject({ type: z.string(), run: z.string().optional() });

/** Serializes one frame as a JSONL line. */
export function encodeFrame(f: unknown): string {
  return JSON.stringify(f) + "\n";
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
