/** The uid an agent's sessions live under, read cheaply (its `uid` control, else `owner`), and the full check it stands in for. */

/**
 * Strict pre-checks, each accepting only a subset of what the real rules accept (src/abi
 * names.ts, identity.ts), so that `send` loads no parser at all: anything they refuse goes to
 * {@link checkAgent}, whose parsers decide and word the error.
 */
const PLAIN_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_+-]{0,63}$/; // no dot: never `.d`, `.sock`, `..`
const CANONICAL_ID = /^(0|[1-9][0-9]{0,9})\n$/;
/** Largest id the identity controls accept (abi/identity.ts ID_MAX). */
const ID_MAX = 4294967294;

/** One control's text; undefined when it is absent (any other failure throws). */
function text(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** A canonical id line's value, or undefined when it is not one. */
function id(line: string): number | undefined {
  if (!CANONICAL_ID.test(line)) return undefined;
  const n = Number(line.slice(0, -1));
  return n <= ID_MAX ? n : undefined;
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
 * `owner` when `uid` is absent (as the full load reads them). Anything this is not sure of (a
 * name or a value outside the strict forms above, neither file there, a read that fails, an
 * alias) is left to {@link checkAgent}, which answers as the full load does. It validates
 * nothing else: a caller that is refused (no `start` from the daemon, or no daemon) runs
 * {@link checkAgent} then, so a bad control is reported with the same words as before. The
 * daemon loads and checks the whole agent on every request before anything starts, so a run that
 * starts had a valid agent.
 */
export async function agentUid(root: string, name: string): Promise<number> {
  try {
    if (PLAIN_NAME.test(name)) {
      const dir = `${root}/agent/${name}.d`;
      const uid = text(`${dir}/uid`);
      const v = uid !== undefined ? id(uid) : id(text(`${dir}/owner`) ?? "");
      if (v !== undefined) return v;
    }
  } catch { /* not sure: the full load says what is wrong */ }
  return await checkAgent(root, name);
}
