/** The `openai-chat` driver: OpenAI Chat Completions (and compatible servers) through the AI SDK, loaded lazily. */
import { CtxError, type Errno } from "../abi/errno.ts";
import type {
  ChatMessage,
  Driver,
  ModelEvent,
  ModelRequest,
  StopReason,
  ToolSpec,
} from "./driver.ts";
import { readSecret } from "./secret.ts";

/** Retries after a 429 or 5xx answer (or a refused connection) before any output arrived. */
export const MAX_RETRIES = 3;
/** First backoff delay; doubled per retry, a Retry-After of at most {@link MAX_DELAY_MS} wins. */
export const BASE_DELAY_MS = 200;
/** Longest wait between two tries. */
export const MAX_DELAY_MS = 8000;

/** The errno of an HTTP status from a provider. */
export function errnoOfStatus(status: number): Errno {
  if (status === 401 || status === 403) return "EACCES";
  if (status === 404) return "ENOENT";
  if (status === 408) return "ETIMEDOUT";
  if (status === 413) return "E2BIG";
  if (status === 429) return "EAGAIN";
  if (status >= 500) return "EIO";
  if (status >= 400) return "EINVAL";
  return "EPROTO";
}

/** True for answers worth another try: 429 and every 5xx. */
export function retryable(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500);
}

interface ApiError {
  statusCode?: number;
  responseHeaders?: Record<string, string>;
  message?: string;
  cause?: unknown;
}

function apiError(e: unknown): ApiError | undefined {
  return e && typeof e === "object" && (e as { name?: string }).name === "AI_APICallError"
    ? e as ApiError
    : undefined;
}

/** The delay before retry `n` (0-based): Retry-After seconds when given and bounded, else backoff. */
export function delayOf(n: number, headers?: Record<string, string>): number {
  const after = headers?.["retry-after"];
  if (after !== undefined && /^\d+(\.\d+)?$/.test(after.trim())) {
    return Math.min(MAX_DELAY_MS, Math.round(Number(after) * 1000));
  }
  return Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** n);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

/** True when the connection was refused (Deno reports it only in a cause's message). */
function refused(e: unknown): boolean {
  for (let c = e, i = 0; c && typeof c === "object" && i < 5; c = (c as ApiError).cause, i++) {
    const { code, message } = c as { code?: unknown; message?: unknown };
    if (code === "ECONNREFUSED") return true;
    if (typeof message === "string" && /Connection refused|os error 111/.test(message)) return true;
  }
  return false;
}

/** A provider failure as a CtxError with a stable errno; `key` never appears in the message. */
export function mapError(e: unknown, key: string | undefined): CtxError {
  if (e instanceof CtxError) return e;
  const redact = (s: string) => (key ? s.replaceAll(key, "<redacted>") : s);
  const api = apiError(e);
  if (api?.statusCode !== undefined) {
    return new CtxError(
      errnoOfStatus(api.statusCode),
      redact(`provider answered HTTP ${api.statusCode}: ${api.message ?? ""}`.trim()),
    );
  }
  if (refused(e)) return new CtxError("ECONNREFUSED", "provider refused the connection");
  const msg = e instanceof Error ? e.message : String(e);
  return new CtxError("EIO", redact(`provider request failed: ${msg}`));
}

function stopOf(reason: string | undefined): StopReason {
  switch (reason) {
    case "stop":
    case "length":
      return reason;
    case "tool-calls":
      return "tool_calls";
    case "content-filter":
      return "content_filter";
  }
  return "other";
}

/** The AI SDK message array of a rendered conversation. */
export function sdkMessages(messages: ChatMessage[]): unknown[] {
  return messages.map((m) => {
    switch (m.role) {
      case "system":
      case "user":
        return { role: m.role, content: m.content };
      case "assistant":
        if (!m.tool_calls?.length) return { role: "assistant", content: m.content };
        return {
          role: "assistant",
          content: [
            ...(m.content ? [{ type: "text", text: m.content }] : []),
            ...m.tool_calls.map((c) => ({
              type: "tool-call",
              toolCallId: c.id,
              toolName: c.name,
              input: c.arguments,
            })),
          ],
        };
      case "tool":
        return {
          role: "tool",
          content: [{
            type: "tool-result",
            toolCallId: m.tool_call_id,
            toolName: m.name,
            output: { type: "text", value: m.content },
          }],
        };
    }
  });
}

function plain(v: unknown): Record<string, unknown> {
  return v && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : {};
}

async function load() {
  // Lazy: importing the AI SDK costs 110-175 ms, paid only by a run that calls a provider.
  const [ai, compat] = await Promise.all([import("ai"), import("@ai-sdk/openai-compatible")]);
  (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  return { ai, compat };
}

/** Streams one Chat Completions call: deltas, tool calls, usage, finish; errors thrown mapped. */
async function* once(
  request: ModelRequest,
  options: { baseURL: string; key?: string; onOutput: () => void },
): AsyncGenerator<ModelEvent> {
  const { ai, compat } = await load();
  const provider = compat.createOpenAICompatible({
    name: request.config?.provider ?? "openai-compatible",
    baseURL: options.baseURL,
    ...(options.key ? { apiKey: options.key } : {}),
    includeUsage: true,
  });
  const tools = Object.fromEntries(
    (request.tools ?? []).map((t: ToolSpec) => [
      t.name,
      ai.tool({ description: t.description, inputSchema: ai.jsonSchema(t.parameters) }),
    ]),
  );
  const result = ai.streamText({
    model: provider.chatModel(request.config?.id ?? request.model),
    // deno-lint-ignore no-explicit-any
    messages: sdkMessages(request.messages) as any,
    allowSystemInMessages: true,
    ...(request.tools?.length ? { tools } : {}),
    maxRetries: 0,
    abortSignal: request.signal,
    onError: () => {}, // every error also arrives as an `error` part below
  });
  let usage = { input_tokens: 0, output_tokens: 0 };
  let reason: StopReason = "other";
  for await (const part of result.fullStream) {
    switch (part.type) {
      case "text-delta":
        if (part.text !== "") {
          options.onOutput();
          yield { type: "delta", text: part.text };
        }
        break;
      case "tool-call":
        options.onOutput();
        yield {
          type: "tool_call",
          id: part.toolCallId,
          name: part.toolName,
          arguments: plain(part.input),
        };
        break;
      case "finish":
        usage = {
          input_tokens: part.totalUsage.inputTokens ?? 0,
          output_tokens: part.totalUsage.outputTokens ?? 0,
        };
        reason = stopOf(part.finishReason);
        break;
      case "error":
        throw part.error;
      case "abort":
        return;
    }
  }
  yield { type: "usage", ...usage };
  yield { type: "finish", reason };
}

/** OpenAI Chat Completions over `default`'s `base_url`; the key comes from the host's secret store. */
export const openaiChatDriver: Driver = {
  name: "openai-chat",
  async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
    const config = request.config;
    const baseURL = config?.defaults.base_url;
    if (!config || !baseURL) {
      throw new CtxError(
        "EINVAL",
        `model ${JSON.stringify(request.model)} has no base_url in its default control`,
        { path: `model/${config?.ref ?? request.model}.d/default` },
      );
    }
    const key = readSecret(config.provider, config.defaults.slot ?? "default");
    for (let n = 0;; n++) {
      let output = false;
      try {
        yield* once(request, { baseURL, key, onOutput: () => (output = true) });
        return;
      } catch (e) {
        if (request.signal.aborted) return;
        const api = apiError(e);
        const again = !output && n < MAX_RETRIES &&
          (retryable(api?.statusCode) || refused(e));
        if (!again) throw mapError(e, key);
        await sleep(delayOf(n, api?.responseHeaders), request.signal);
        if (request.signal.aborted) return;
      }
    }
  },
};
