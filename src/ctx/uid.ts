/** The full agent check `send` runs only when nothing started: the errors of a whole load, without loading its parsers up front. */

/**
 * Loads and validates the whole agent (every control, the control schemas), as `send` once did
 * before it connected: throws exactly the error that check throws (ENOENT for no agent, EINVAL
 * for a bad control, ...), or returns the agent's uid. Imported lazily: a send that starts never
 * loads the parsers.
 */
export async function checkAgent(root: string, name: string): Promise<number> {
  const { loadAgent } = await import("../store/agent.ts");
  return loadAgent(root, name, { secrets: false }).uid; // the identity, not env
}
