/** The runtime's side of the prompt: the agent's home and the connection's workspace fd as sources, snapshots, the envelope's tool context. */
import { toolBlock } from "../abi/prompt.ts";
import { loadedTools } from "../prompt/collect.ts";
import { type Prompt, renderPrompt, skillsSnapshot } from "../prompt/render.ts";
import { dirSource, type Source } from "../prompt/source.ts";
import { readSessionFile, writeSessionFiles } from "../store/session/files.ts";
import type { SessionRef } from "../store/session/ref.ts";
import type { ModelRun } from "./turn.ts";
import type { AgentView } from "./view.ts";
import { ignore } from "../abi/errno.ts";

/** The agent home and the workspace as prompt sources, read as the agent (nothing followed). */
function placesOf(x: ModelRun): { home?: Source; workspace?: Source; cwd: string } {
  const { agent, root } = x;
  const id = { uid: agent.uid, gid: agent.gid, groups: agent.groups };
  return {
    home: dirSource(`${root}/home/${agent.uid}/agent/${agent.name}`, { at: "/home/agent", id }),
    // The connection closes its workspace fd when the client leaves (the number may then be
    // reused): checked in the same synchronous step as the open, so the fd is still the client's.
    workspace: x.run.origin.closed
      ? undefined
      : dirSource(`/proc/self/fd/${x.workspace.fd}`, { at: "/workspace", id }),
    cwd: x.cwd,
  };
}

/** Renders the run's first system message (system.md, template, AGENTS.md, skills, tools). */
export function promptOf(x: ModelRun, window: number | undefined): Prompt {
  const places = placesOf(x);
  try {
    return renderPrompt({
      agent: x.agent.name,
      model: x.agent.model,
      session: x.session,
      system: x.agent.system,
      template: x.agent.template,
      places,
      window,
    });
  } finally {
    places.home?.close();
    places.workspace?.close();
  }
}

/** The session's AGENTS.md and SKILLS.md load snapshots; best-effort, never the run's failure. */
export function snapshot(ref: SessionRef, prompt: Prompt): void {
  try {
    const want: Record<string, string> = {
      "AGENTS.md": prompt.rules.endsWith("\n") ? prompt.rules : `${prompt.rules}\n`,
      "SKILLS.md": skillsSnapshot(prompt.skillList),
    };
    // Only what changed is replaced: most runs rewrite nothing (and pay no fsync for it).
    const changed = Object.fromEntries(
      Object.entries(want).filter(([name, text]) => readSessionFile(ref, name) !== text),
    );
    if (Object.keys(changed).length) writeSessionFiles(ref, changed);
  } catch { /* any kind: observability only, it must never fail a run */ }
}

/**
 * The envelope's `tool_context` for an executable agent: the tools `tsh load`/`tsh pin` put in
 * its context (the same block a model-backed prompt shows), or "" when none.
 */
export function toolContextOf(root: string, agent: AgentView): string {
  const id = { uid: agent.uid, gid: agent.gid, groups: agent.groups };
  const home = dirSource(`${root}/home/${agent.uid}/agent/${agent.name}`, {
    at: "/home/agent",
    id,
  });
  try {
    const tools = loadedTools(home);
    return tools.length ? toolBlock(tools) : "";
  } catch (e) {
    ignore(e, "EIO", "EINVAL");
    return ""; // a corrupt state file says so in `tsh loads`; the envelope stays valid
  } finally {
    home?.close();
  }
}
