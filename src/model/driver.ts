/** The model driver interface: host-side adapters turn a message array into canonical stream events. */

/** One rendered chat message handed to a driver. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
}

/** What a driver streams back (the host adds `run` and records them). */
export type ModelEvent =
  | { type: "delta"; text: string }
  | { type: "usage"; input_tokens: number; output_tokens: number };

/** One model call. */
export interface ModelRequest {
  /** Model reference as the agent names it (`debug/echo`, `main`). */
  model: string;
  messages: ChatMessage[];
  /** Aborted on cancellation: the driver must stop streaming promptly. */
  signal: AbortSignal;
}

/** A replaceable adapter. Provider secrets stay inside drivers; nothing here reaches agents. */
export interface Driver {
  /** Driver name as written in the model's `driver` control. */
  readonly name: string;
  /** Streams the answer to the last user message. */
  stream(request: ModelRequest): AsyncIterable<ModelEvent>;
}
