/** The first system message of a model-backed run: the template rendered with every block (used by the runtime and `ctx agent prompt`). */
import { toCtxError } from "../abi/errno.ts";
import {
  DEFAULT_TEMPLATE,
  EMPTY,
  mergeRules,
  renderTemplate,
  RUNTIME_CONTRACT,
  type Skill,
  skillsBlock,
  toolBlock,
} from "../abi/prompt.ts";
import { skillBudget } from "../abi/window.ts";
import { discoverRules, discoverSkills, loadedTools, type Places } from "./collect.ts";

/** The statement `{{history_messages}}` becomes: history itself travels as chat messages. */
export const HISTORY_NOTE = "Earlier messages of this session follow this system message as " +
  "chat messages: the newest whole turns that fit the context window. The full history stays " +
  "in the session's messages.jsonl.";

/** What the renderer needs: the agent's prompt controls, where its files are, and the window. */
export interface PromptInput {
  agent: string;
  model: string;
  session: string;
  /** `system.md` (may be empty). */
  system: string;
  /** `prompt.template.md`; absent: {@link DEFAULT_TEMPLATE}. */
  template?: string;
  places: Places;
  /** The effective window in tokens; undefined when unknown. */
  window?: number;
  /** The clock (default now). */
  now?: Date;
}

/** The rendered prompt and its blocks (for snapshots and per-category estimates). */
export interface Prompt {
  /** The whole first system message. */
  system: string;
  /** `{{rules}}`: the merged AGENTS.md text, also the session's AGENTS.md snapshot. */
  rules: string;
  /** `{{skills}}`: the skills block. */
  skills: string;
  /** The skills discovered (the SKILLS.md snapshot lists them). */
  skillList: Skill[];
  /** `{{tool_injection}}`. */
  tools: string;
  /** `{{agent_instructions}}`. */
  instructions: string;
}

/**
 * Renders the first system message from `prompt.template.md` (or the default template),
 * `system.md`, AGENTS.md rules, skill metadata (within 2% of the window's characters, 8,000 at
 * most), the tsh tool context, the history note, time variables and the runtime contract. Reads
 * only through `places` (fds, nothing followed). A tool context that cannot be read is shown as
 * such, never silently empty.
 */
export function renderPrompt(x: PromptInput): Prompt {
  const now = x.now ?? new Date();
  const rules = mergeRules(discoverRules(x.places));
  const skillList = discoverSkills(x.places);
  const skills = skillsBlock(skillList, skillBudget(x.window));
  let tools: string;
  try {
    tools = toolBlock(loadedTools(x.places.home));
  } catch (e) {
    const err = toCtxError(e);
    tools = `(tool context unreadable: ${err.errno}: ${err.message})`;
  }
  const instructions = x.system.trim() === "" ? EMPTY.agent_instructions : x.system.trimEnd();
  const system = renderTemplate(x.template ?? DEFAULT_TEMPLATE, {
    agent: x.agent,
    model: x.model,
    session: x.session,
    cwd: x.places.cwd,
    current_time: now.toISOString(),
    current_time_unix: String(Math.floor(now.getTime() / 1000)),
    agent_instructions: instructions,
    rules,
    skills,
    tool_injection: tools,
    history_messages: HISTORY_NOTE,
    runtime_contract: RUNTIME_CONTRACT,
  });
  return { system, rules, skills, skillList, tools, instructions };
}

/** The SKILLS.md snapshot: metadata only (name, description, path), one skill per line. */
export function skillsSnapshot(skills: readonly Skill[]): string {
  if (skills.length === 0) return `${EMPTY.skills}\n`;
  return skills.map((s) => `- ${s.name}: ${s.description} (${s.path})\n`).join("");
}
