/** The policy side of the agent's `mount` and `root` controls: each bind needs `mount:<target>` grants. */
import { CtxError } from "../abi/errno.ts";
import type { AgentDef } from "../store/agent.ts";
import { allows, type Ask, ruleText } from "./rules.ts";

/** The grants a bind at `target` in `mode` needs: read always, write too when writable. */
function asks(subject: string, target: string, mode: "ro" | "rw"): Ask[] {
  const ask = (permission: string): Ask => ({ subject, cls: "mount", object: target, permission });
  return mode === "rw" ? [ask("read"), ask("write")] : [ask("read")];
}

/**
 * Throws EACCES unless the agent policy allows every bind its controls ask for: each `mount` line
 * needs `allow <subject> mount:<target> read` (and `write` for `rw`), a `root` needs both on `/`.
 * The control says what to bind, policy says whether it may: both must allow (the intersection).
 * The line restating the default `/ctx` read-only bind needs nothing.
 */
export function checkMounts(
  agent: Pick<AgentDef, "name" | "subject" | "policy" | "mount" | "root">,
): void {
  const wanted: [string, "ro" | "rw", string][] = agent.mount
    .filter((m) => !(m.source === "/ctx" && m.target === "/ctx" && m.mode === "ro"))
    .map((m) => [m.target, m.mode, `"mount" line for "${m.target}"`]);
  if (agent.root !== undefined) wanted.push(["/", "rw", `"root" ${JSON.stringify(agent.root)}`]);
  for (const [target, mode, what] of wanted) {
    for (const ask of asks(agent.subject, target, mode)) {
      if (!allows(agent.policy, ask)) {
        throw new CtxError(
          "EACCES",
          `${what} of agent "${agent.name}" needs "${ruleText(ask)}" in its policy`,
        );
      }
    }
  }
}
