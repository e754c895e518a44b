/** The built-in model catalog: known context limits (tokens) by `<provider>/<native id>`, the second source of a model's `limit`. */

/**
 * Combined context limits of well-known models, as their providers publish them. Precedence
 * (spec/models.md): the model's own `limit` control (host configuration, written by root) →
 * this catalog → `unknown`. Keys are `<provider component>/<native id>` (the `id` control, else
 * the model component); nothing is guessed from a name's prefix.
 */
export const CATALOG: Readonly<Record<string, number>> = {
  "openai/gpt-4o": 128000,
  "openai/gpt-4o-mini": 128000,
  "openai/gpt-4.1": 1047576,
  "openai/gpt-4.1-mini": 1047576,
  "openai/gpt-4.1-nano": 1047576,
  "openai/o3": 200000,
  "openai/o4-mini": 200000,
  "anthropic/claude-3-5-haiku-latest": 200000,
  "anthropic/claude-3-7-sonnet-latest": 200000,
  "anthropic/claude-sonnet-4-0": 200000,
  "anthropic/claude-opus-4-0": 200000,
  "anthropic/claude-sonnet-4-5": 200000,
};

/** The catalog's limit for a model, or undefined. */
export function catalogLimit(provider: string, id: string): number | undefined {
  const key = `${provider}/${id}`;
  return Object.hasOwn(CATALOG, key) ? CATALOG[key] : undefined;
}
