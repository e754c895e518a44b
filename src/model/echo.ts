/** The `debug` driver behind `debug/echo`: answers with the last user message, word by word. */
import type { Driver, ModelEvent, ModelRequest } from "./driver.ts";

/** Echoes the last user message as deltas (one per word, spaces kept), then usage. */
export const echoDriver: Driver = {
  name: "debug",
  async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
    const last = request.messages.findLast((m) => m.role === "user")?.content ?? "";
    const input = request.messages.reduce((n, m) => n + m.content.length, 0);
    const parts = last.match(/\S+\s*|\s+/g) ?? [];
    for (const text of parts) {
      if (request.signal.aborted) return;
      yield { type: "delta", text };
      await Promise.resolve(); // yield to the loop so a cancel can land between deltas
    }
    yield {
      type: "usage",
      input_tokens: Math.ceil(input / 4),
      output_tokens: Math.ceil(last.length / 4),
    };
  },
};
