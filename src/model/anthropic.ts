/** The `anthropic-messages` driver: the Anthropic Messages API through the AI SDK (`@ai-sdk/anthropic`), loaded lazily. */
import { WIRE_URLS } from "../abi/providers.ts";
import { sdkDriver } from "./sdk.ts";

/** The official endpoint, used when the model's `default` names no `base_url`. */
export const ANTHROPIC_URL = WIRE_URLS["anthropic-messages"]!;

/**
 * POST `<base_url>/messages`, streamed, the key as `x-api-key`. `max_tokens` is the package's
 * own default for the model, never derived from the context window.
 */
export const anthropicMessagesDriver = sdkDriver({
  name: "anthropic-messages",
  defaultURL: ANTHROPIC_URL,
  async model(request, endpoint) {
    const { createAnthropic } = await import("@ai-sdk/anthropic");
    // apiKey is always a string: the package must never fall back to ANTHROPIC_API_KEY.
    const provider = createAnthropic({
      baseURL: endpoint.baseURL,
      apiKey: endpoint.key ?? "",
      fetch: endpoint.fetch,
    });
    return provider.messages(request.config?.id ?? request.model);
  },
});
