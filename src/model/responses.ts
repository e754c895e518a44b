/** The `openai-responses` driver: the OpenAI Responses API through the AI SDK (`@ai-sdk/openai`), loaded lazily. */
import { WIRE_URLS } from "../abi/providers.ts";
import { sdkDriver } from "./sdk.ts";

/** The official endpoint, used when the model's `default` names no `base_url`. */
export const OPENAI_URL = WIRE_URLS["openai-responses"]!;

/**
 * POST `<base_url>/responses`, streamed. `store: false`: every request carries the whole
 * conversation (CortexFS sessions, never provider-side threads).
 */
export const openaiResponsesDriver = sdkDriver({
  name: "openai-responses",
  defaultURL: OPENAI_URL,
  options: { openai: { store: false } },
  async model(request, endpoint) {
    const { createOpenAI } = await import("@ai-sdk/openai");
    // apiKey is always a string: the package must never fall back to OPENAI_API_KEY.
    const provider = createOpenAI({
      baseURL: endpoint.baseURL,
      apiKey: endpoint.key ?? "",
      fetch: endpoint.fetch,
    });
    return provider.responses(request.config?.id ?? request.model);
  },
});
