/** The uid an agent's sessions live under, read cheaply (its `uid` control, else `owner`), and the full check it stands in for. */
import { parseOwner, parseUid } from "../abi/identity.ts";
import { checkName } from "../abi/names.ts";

/** One control's text; undefined when it is absent (any other failure throws). */
function text(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * Loads and validates the whole agent (every control, the control schemas), as `send` once did
 * before it connected: throws exactly the error that check throws (ENOENT for no agent, EINVAL
 * for a bad control, ...), or returns the agent's uid.
 */
export async function checkAgent(root: string, name: string): Promise<number> {
  const { loadAgent } = await import("../store/agent.ts");
  return loadAgent(root, name, { secrets: false }).uid; // the identity, not env
}

/**
 * The uid of agent `name` for finding its sessions (`home/<uid>/...`): the `uid` control, else
 * `owner` when `uid` is absent (as the full load reads them), each parsed by its own parser;
 * anything this is not sure of (a bad name, neither file there, a read that fails, a value that
 * does not parse, an alias) is left to
 * {@link checkAgent}, which answers as the full load does. It validates nothing else: a caller
 * that is refused (no `start` from the daemon, or no daemon) runs {@link checkAgent} then, so a
 * bad control is reported with the same words as before. The daemon loads and checks the whole
 * agent on every request before anything starts, so a run that starts had a valid agent.
 */
export async function agentUid(root: string, name: string): Promise<number> {
  try {
    checkName(name, { kind: "agent" });
    const dir = `${root}/agent/${name}.d`;
    const uid = text(`${dir}/uid`);
    if (uid !== undefined) return parseUid(uid);
    const owner = text(`${dir}/owner`);
    if (owner !== undefined) return parseOwner(owner);
  } catch { /* not sure: the full load says what is wrong */ }
  return await checkAgent(root, name);
}
