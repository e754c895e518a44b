/** What every AI SDK driver shares: the retry loop, the neutral message array, the stream of canonical events. */
import { CtxError, ignore } from "../abi/errno.ts";
import {
  apiError,
  delayOf,
  mapError,
  MAX_RETRIES,
  refused,
  retryable,
  streamError,
} from "./fault.ts";
import {
  type ChatMessage,
  type Driver,
  MAX_RESPONSE_BYTES,
  MAX_TURN_OUTPUT,
  type ModelEvent,
  type ModelRequest,
  type StopReason,
  tooBig,
  type ToolSpec,
} from "./driver.ts";
import { readSecret } from "./secret.ts";
import { hostBaseURL } from "../store/providers.ts";

export {
  BASE_DELAY_MS,
  delayOf,
  errnoOfStatus,
  mapError,
  MAX_DELAY_MS,
  MAX_RETRIES,
  retryable,
} from "./fault.ts";

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

/**
 * Signed reasoning of recent tool-call turns, by the turn's first tool call id: the AI SDK
 * reasoning parts (text + the provider's metadata, e.g. Anthropic's `signature`) that must go back
 * with that assistant turn (Anthropic refuses a tool loop with thinking on otherwise). Memory of
 * this process only, the newest {@link KEPT_TURNS} turns; never recorded, never shown to agents.
 * Reasoning without provider metadata (Chat Completions `reasoning_content`) is not kept: some
 * compatible servers refuse it in a request.
 */
const kept = new Map<string, unknown[]>();
/** Turns whose signed reasoning is kept. */
const KEPT_TURNS = 64;

function keep(callId: string, parts: unknown[]): void {
  kept.delete(callId);
  kept.set(callId, parts);
  // deno-lint-ignore no-non-null-assertion
  while (kept.size > KEPT_TURNS) kept.delete(kept.keys().next().value!); // size > 0: a key exists
}

/** The reasoning parts kept for the assistant turn whose first tool call is `callId`. */
export function keptReasoning(callId: string): unknown[] | undefined {
  return kept.get(callId);
}

/**
 * The AI SDK message array of a rendered conversation. An assistant turn with tool calls gets the
 * reasoning parts `reasoning(firstCallId)` gives (default: the signed reasoning this process kept)
 * before its text.
 */
export function sdkMessages(
  messages: ChatMessage[],
  options: { reasoning?: (callId: string) => unknown[] | undefined } = {},
): unknown[] {
  const reasoning = options.reasoning ?? keptReasoning;
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
            ...(reasoning(m.tool_calls[0].id) ?? []),
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

/** The `ai` module, imported on a driver's first call (never by `ctx`'s module graph). */
export async function loadAi() {
  // Lazy: importing the AI SDK costs 110-175 ms, paid only by a run that calls a provider.
  const ai = await import("ai");
  (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  return ai;
}

/** The `ai` module's type. */
export type Ai = Awaited<ReturnType<typeof loadAi>>;

/** What one try gets to build its provider model. */
export interface Endpoint {
  baseURL: string;
  /** The stored key, when there is one. */
  key?: string;
  /** A fetch that drops an auth header left empty (no key stored: a local server). */
  fetch: typeof fetch;
}

/** The per-wire-format part of an SDK driver. */
export interface SdkWire {
  /** The driver name (`driver` control). */
  name: string;
  /** Base URL when the model's `default` has none; undefined: base_url is required. */
  defaultURL?: string;
  /** The provider's language model for this request (its package imported lazily here). */
  model(request: ModelRequest, endpoint: Endpoint): Promise<unknown>;
  /** Provider options for the call (e.g. no server-side storage). */
  options?: Record<string, Record<string, unknown>>;
}

/**
 * `fetch` whose response bodies end with {@link tooBig} after `max` bytes; the body below is
 * cancelled then, which closes the connection.
 */
export function boundedFetch(inner: typeof fetch, max = MAX_RESPONSE_BYTES): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    if (!res.body) return res;
    let n = 0;
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          n += chunk.byteLength;
          if (n > max) c.error(tooBig("response", max));
          else c.enqueue(chunk);
        },
      }),
    );
    return new Response(body, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}

/** A fetch that removes `x-api-key` and `authorization` headers whose value carries no key. */
export function keylessFetch(key: string | undefined): typeof fetch {
  if (key) return boundedFetch(fetch);
  return boundedFetch((input, init) => {
    const headers = new Headers(init?.headers);
    for (const h of ["x-api-key", "authorization"]) {
      const v = headers.get(h);
      if (v !== null && (v.trim() === "" || v.trim() === "Bearer")) headers.delete(h);
    }
    return fetch(input, { ...init, headers });
  });
}

/**
 * Streams one try (see {@link attempt}). A try left early (a bound here or in the host) closes its
 * connection at once: its own signal is aborted on the way out (cancelling the body alone left the
 * connection streaming for half a minute).
 */
async function* once(
  ai: Ai,
  wire: SdkWire,
  request: ModelRequest,
  o: { endpoint: Endpoint; onOutput: () => void },
): AsyncGenerator<ModelEvent> {
  const stop = new AbortController();
  try {
    const signal = AbortSignal.any([request.signal, stop.signal]);
    yield* attempt(ai, wire, { ...request, signal }, o);
  } finally {
    stop.abort();
  }
}

/** Streams one try: deltas, tool calls, usage, finish; errors thrown as they come (mapped by the caller). */
async function* attempt(
  ai: Ai,
  wire: SdkWire,
  request: ModelRequest,
  o: { endpoint: Endpoint; onOutput: () => void },
): AsyncGenerator<ModelEvent> {
  const model = await wire.model(request, o.endpoint);
  const tools = Object.fromEntries(
    (request.tools ?? []).map((t: ToolSpec) => [
      t.name,
      ai.tool({ description: t.description, inputSchema: ai.jsonSchema(t.parameters) }),
    ]),
  );
  const result = ai.streamText({
    // deno-lint-ignore no-explicit-any
    model: model as any,
    // deno-lint-ignore no-explicit-any
    messages: sdkMessages(request.messages) as any,
    allowSystemInMessages: true,
    ...(request.tools?.length ? { tools } : {}),
    // the model's `effort`, provider-neutral: each package maps it (reasoning_effort,
    // reasoning.effort, Anthropic thinking/effort) or drops it for a model without reasoning
    ...(request.config?.effort ? { reasoning: request.config.effort } : {}),
    // deno-lint-ignore no-explicit-any
    ...(wire.options ? { providerOptions: wire.options as any } : {}),
    maxRetries: 0,
    abortSignal: request.signal,
    onError: () => {}, // every error also arrives as an `error` part below
  });
  let usage = { input_tokens: 0, output_tokens: 0 };
  let reason: StopReason = "other";
  // this turn's reasoning blocks by id, with the provider metadata they carry (signatures)
  const thoughts = new Map<string, { text: string; meta: Record<string, unknown> }>();
  const think = (id: string, text: string, meta: unknown) => {
    const t = thoughts.get(id) ?? { text: "", meta: {} };
    t.text += text;
    for (const [k, v] of Object.entries(plain(meta))) {
      t.meta[k] = { ...plain(t.meta[k]), ...plain(v) };
    }
    thoughts.set(id, t);
  };
  let firstCall: string | undefined;
  // What the SDK holds for this turn: text, reasoning and the argument text of calls not yet
  // handed over (the host counts the rest).
  let size = 0;
  const grow = (n: number) => {
    size += n;
    if (size > MAX_TURN_OUTPUT) throw tooBig("turn output", MAX_TURN_OUTPUT);
  };
  for await (const part of result.fullStream) {
    switch (part.type) {
      case "tool-input-delta":
        grow(part.delta.length);
        break;
      case "reasoning-start":
      case "reasoning-end":
        think(part.id, "", part.providerMetadata);
        break;
      case "text-delta":
        grow(part.text.length);
        if (part.text !== "") {
          o.onOutput();
          yield { type: "delta", text: part.text };
        }
        break;
      case "reasoning-delta":
        grow(part.text.length);
        think(part.id, part.text, part.providerMetadata);
        if (part.text !== "") {
          o.onOutput();
          yield { type: "reasoning_delta", text: part.text };
        }
        break;
      case "tool-call":
        firstCall ??= part.toolCallId;
        o.onOutput();
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
  const signed = [...thoughts.values()].filter((t) =>
    Object.values(t.meta).some((v) => Object.keys(plain(v)).length > 0)
  );
  if (firstCall !== undefined && signed.length) {
    keep(
      firstCall,
      signed.map((t) => ({ type: "reasoning", text: t.text, providerOptions: t.meta })),
    );
  }
  yield { type: "usage", ...usage };
  yield { type: "finish", reason };
}

/**
 * A failure to reach the provider at all, naming the model and where it was sent (the URL
 * without user info, query or fragment: those may hold a credential); an answer the provider
 * gave is left as it is.
 */
function unreached(err: CtxError, model: string, baseURL: string): CtxError {
  if (err.errno !== "ECONNREFUSED" && !err.message.startsWith("provider request failed")) {
    return err;
  }
  let url = baseURL;
  try {
    const u = new URL(baseURL);
    url = `${u.protocol}//${u.host}${u.pathname}`;
  } catch (e) {
    ignore(e, TypeError); /* not a URL: the SDK failed on it, shown as configured */
  }
  return new CtxError(err.errno, `${err.message} (model ${model} at ${url})`, { cause: err });
}

/**
 * A driver on the AI SDK for one wire format: `base_url` from the model's `default` (or the
 * wire's default URL), the key from the host's secret store, the SDK's own retries off and ours
 * on: a try that fails with 429, 5xx (an HTTP answer, or an error event in a 200 stream that
 * stands for one) or a refused connection before any output is tried again
 * (at most {@link MAX_RETRIES} more; Retry-After honoured, else backoff); everything else, and
 * the last failure, is thrown as a CtxError with a stable errno (the key redacted).
 */
export function sdkDriver(wire: SdkWire): Driver {
  return {
    name: wire.name,
    async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
      const config = request.config;
      // the model's own `default`, then the host's providers.d file, then the official endpoint
      const baseURL = config?.defaults.base_url ??
        (config && hostBaseURL(config.provider)) ?? wire.defaultURL;
      if (!config || !baseURL) {
        throw new CtxError(
          "EINVAL",
          `model ${JSON.stringify(request.model)} has no base_url in its default control`,
          { path: `model/${config?.ref ?? request.model}.d/default` },
        );
      }
      const key = readSecret(config.provider, config.defaults.slot ?? "default");
      const endpoint = { baseURL, key, fetch: keylessFetch(key) };
      const ai = await loadAi();
      for (let n = 0;; n++) {
        let output = false;
        try {
          yield* once(ai, wire, request, { endpoint, onOutput: () => (output = true) });
          return;
        } catch (e) {
          if (request.signal.aborted) return;
          const api = apiError(e);
          // a stream's error event counts as the status it stands for (Anthropic
          // overloaded_error as 529, a Chat Completions server_error chunk as 500)
          const again = !output && n < MAX_RETRIES &&
            (retryable(api?.statusCode ?? streamError(e)?.status) || refused(e));
          if (!again) throw unreached(mapError(e, key), config.ref, baseURL);
          await sleep(delayOf(n, api?.responseHeaders), request.signal);
          if (request.signal.aborted) return;
        }
      }
    },
  };
}
