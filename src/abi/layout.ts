/** Where sessions live: the one statement of the session directory layout (pure paths). */
import type { Scope } from "./frames.ts";

/**
 * The directory holding an agent's sessions of `scope`: private under `home/<uid>`, shared under
 * `shared/agents`, temp under the run dir. The one statement of the session layout.
 */
export function sessionBase(
  o: { root: string; run: string; uid: number; agent: string; scope: Scope },
): string {
  return o.scope === "private"
    ? `${o.root}/home/${o.uid}/agent/${o.agent}/session`
    : o.scope === "shared"
    ? `${o.root}/shared/agents/agent/${o.agent}/session`
    : `${o.run}/temp/${o.uid}/${o.agent}/session`;
}
