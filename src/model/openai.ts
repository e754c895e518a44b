/** The `openai-chat` driver: OpenAI Chat Completions (and every compatible server) through the AI SDK, loaded lazily. */
import { sdkDriver } from "./sdk.ts";

export {
  BASE_DELAY_MS,
  delayOf,
  errnoOfStatus,
  mapError,
  MAX_DELAY_MS,
  MAX_RETRIES,
  retryable,
  sdkMessages,
} from "./sdk.ts";

/** OpenAI Chat Completions over `default`'s `base_url` (required); the key from the host's secret store. */
export const openaiChatDriver = sdkDriver({
  name: "openai-chat",
  async model(request, endpoint) {
    const compat = await import("@ai-sdk/openai-compatible");
    const provider = compat.createOpenAICompatible({
      name: request.config?.provider ?? "openai-compatible",
      baseURL: endpoint.baseURL,
      ...(endpoint.key ? { apiKey: endpoint.key } : {}),
      includeUsage: true,
    });
    return provider.chatModel(request.config?.id ?? request.model);
  },
});
