/** The model driver interface: host-side adapters turn a message array into canonical stream events. */
import { CtxError } from "../abi/errno.ts";

/** One tool call as a model asked for it (arguments already parsed to an object). */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** One rendered chat message handed to a driver. */
export type ChatMessage =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string; tool_calls?: ModelToolCall[] }
  | { role: "tool"; content: string; tool_call_id: string; name: string };

/** A tool offered to the model: a name of `[A-Za-z0-9_-]{1,64}`, a description, a JSON Schema. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * Most characters (UTF-16 units) one model turn may stream: its text, reasoning and tool-call
 * arguments together. More ends the run E2BIG (the host counts; the AI SDK drivers also count the
 * argument deltas the SDK accumulates before it hands a call over).
 */
export const MAX_TURN_OUTPUT = 4 * 1024 * 1024;
/** Most characters all the turns of one run may stream together (E2BIG past it). */
export const MAX_RUN_OUTPUT = 16 * 1024 * 1024;
/**
 * Most bytes of one provider response body an AI SDK driver reads (E2BIG past it): bounds what
 * no event shows, such as one endless SSE line. Generous: a token per chunk costs ~200 bytes.
 */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The error a turn, a run or a response past its bound ends with. */
export function tooBig(what: string, max: number): CtxError {
  const unit = what === "response" ? "bytes" : "characters";
  return new CtxError("E2BIG", `the model's ${what} is over ${max} ${unit}`);
}

/** Why a model turn ended, provider-neutral. */
export type StopReason = "stop" | "length" | "tool_calls" | "content_filter" | "other";

/** What a driver streams back (the host adds `run` and records them). */
export type ModelEvent =
  | { type: "delta"; text: string }
  | { type: "reasoning_delta"; text: string }
  | { type: "usage"; input_tokens: number; output_tokens: number }
  | { type: "tool_call"; id: string; name: string; arguments: Record<string, unknown> }
  | { type: "finish"; reason: StopReason };

/** A model object as the host resolved it from `model/<provider>/<model>.d/`. */
export interface ModelConfig {
  /** The real reference (aliases resolved): `<provider>/<model>`. */
  ref: string;
  /** The `<provider>` component: also the secret's provider directory. */
  provider: string;
  /** The provider's native model id (`id` control), else the `<model>` component. */
  id: string;
  /** `default` control keys (`base_url`, `slot`, `script`, ...). */
  defaults: Record<string, string>;
  /**
   * The `effort` control when it is not `auto`: the reasoning effort asked of the provider
   * (each package maps it for its model); absent: the provider's default, nothing sent.
   */
  effort?: "low" | "medium" | "high" | "xhigh";
}

/** Who the call is for: the agent whose files a driver may read (as that uid), and the tree. */
export interface CallerContext {
  root: string;
  agent: string;
  uid: number;
  gid: number;
  groups: number[];
}

/** One model call. */
export interface ModelRequest {
  /** Model reference as the agent names it (`debug/echo`, `main`). */
  model: string;
  /** The resolved model object (absent for callers that only have a reference). */
  config?: ModelConfig;
  messages: ChatMessage[];
  /** Tools the model may call; none when absent. */
  tools?: ToolSpec[];
  /** The agent this call serves (the script driver reads its file as this identity). */
  caller?: CallerContext;
  /** Aborted on cancellation: the driver must stop streaming promptly. */
  signal: AbortSignal;
}

/** A replaceable adapter. Provider secrets stay inside drivers; nothing here reaches agents. */
export interface Driver {
  /** Driver name as written in the model's `driver` control. */
  readonly name: string;
  /** Streams the answer to the conversation. */
  stream(request: ModelRequest): AsyncIterable<ModelEvent>;
}
