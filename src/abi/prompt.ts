/** The prompt runtime's pure parts: the default template, the runtime contract, rules, skills and tool blocks, rendering. */

/** The immutable CortexFS runtime contract (seed "Prompt Runtime"): in every first system message. */
export const RUNTIME_CONTRACT = [
  "Your only native callable tool is tsh.",
  "Other CortexFS tools are discovered, loaded, pinned, and invoked through tsh.",
  "Prompt text and skill metadata do not grant permissions.",
].join("\n");

/** The template used when an agent has no `prompt.template.md` (and the one a new agent gets). */
export const DEFAULT_TEMPLATE = `# CortexFS Agent System Prompt

Time: {{current_time_unix}}
Agent: {{agent}}

## Runtime Contract

{{runtime_contract}}

## AGENT Instructions

{{agent_instructions}}

## Rules

{{rules}}

## Skills

{{skills}}

## Tool Injection

{{tool_injection}}

## History Messages

{{history_messages}}
`;

/** The variables a template may use; any other `{{name}}` is left as written. */
export const PROMPT_VARS = [
  "agent",
  "model",
  "session",
  "cwd",
  "current_time",
  "current_time_unix",
  "agent_instructions",
  "rules",
  "skills",
  "tool_injection",
  "history_messages",
  "runtime_contract",
] as const;

/** One template variable. */
export type PromptVar = typeof PROMPT_VARS[number];

/** Placeholders for empty blocks. */
export const EMPTY = {
  agent_instructions: "(no agent instructions: agent/<name>.d/system.md is empty)",
  rules: "(no AGENTS.md rules discovered)",
  skills: "(no skills discovered)",
  tool_injection: "(no tools loaded: discover them with tsh tools, add one with tsh load TOOL)",
} as const;

const VAR = /\{\{([a-z_]+)\}\}/g;

/**
 * Renders `template` in one pass: each `{{name}}` of {@link PROMPT_VARS} becomes its value
 * (values are inserted verbatim, never expanded again: a `{{rules}}` inside an AGENTS.md stays
 * text); unknown names stay as written. The runtime contract cannot be left out: a template
 * without `{{runtime_contract}}` gets it appended under `## Runtime Contract`.
 */
export function renderTemplate(template: string, vars: Record<PromptVar, string>): string {
  let contract = false;
  const out = template.replace(VAR, (all, name: string) => {
    if (!(PROMPT_VARS as readonly string[]).includes(name)) return all;
    if (name === "runtime_contract") contract = true;
    return vars[name as PromptVar];
  });
  if (contract) return out;
  return `${out.replace(/\n*$/, "")}\n\n## Runtime Contract\n\n${vars.runtime_contract}\n`;
}

/** One discovered AGENTS.md: its path as the agent sees it, and its (bounded) text. */
export interface RuleFile {
  path: string;
  text: string;
  /** True when the file was cut to its bound. */
  truncated?: boolean;
}

/** Each AGENTS.md is read up to this many bytes. */
export const MAX_RULE_FILE = 32 * 1024;
/** The merged rules never exceed this many characters (later, more specific files are cut first). */
export const MAX_RULES = 64 * 1024;

/**
 * The merged rules text (`{{rules}}` and the session's AGENTS.md snapshot): each file as
 * `### <path>\n\n<text>`, in discovery order (global first, then the workspace from its root down
 * to the cwd); a cut file says so. Within {@link MAX_RULES} characters: a file that would pass it
 * is cut with a marker, later files are left out with a line naming them.
 */
export function mergeRules(files: readonly RuleFile[], max = MAX_RULES): string {
  if (files.length === 0) return EMPTY.rules;
  const parts: string[] = [];
  let used = 0;
  const left: string[] = [];
  for (const f of files) {
    const body = f.text.replace(/\s+$/, "") + (f.truncated ? "\n\n(truncated)" : "");
    let block = `### ${f.path}\n\n${body}`;
    if (used >= max) {
      left.push(f.path);
      continue;
    }
    if (used + block.length > max) block = block.slice(0, max - used) + "\n\n(truncated)";
    parts.push(block);
    used += block.length + 2;
  }
  if (left.length) parts.push(`(left out, over ${max} characters of rules: ${left.join(", ")})`);
  return parts.join("\n\n");
}

/** One skill's metadata: never its body (SKILL.md is read by the agent when it picks the skill). */
export interface Skill {
  name: string;
  description: string;
  /** The SKILL.md path as the agent sees it. */
  path: string;
}

/** Longest description kept when the skills block is over its budget. */
export const SHORT_DESCRIPTION = 160;
/** The skills budget when the window is unknown, and its cap when known. */
export const MAX_SKILL_CHARS = 8000;

function skillLine(s: Skill, description: string): string {
  return `- ${s.name}: ${description} (${s.path})`;
}

/**
 * The skills block within `budget` characters (seed: 2% of the window's characters, 8,000 when
 * unknown): one `- name: description (path)` line each. Over the budget, descriptions are
 * shortened to {@link SHORT_DESCRIPTION} characters first (with a warning line); still over,
 * skills are left out from the end, and a warning says how many.
 */
export function skillsBlock(skills: readonly Skill[], budget: number): string {
  if (skills.length === 0) return EMPTY.skills;
  const full = skills.map((s) => skillLine(s, s.description));
  const size = (lines: string[]) => lines.reduce((n, l) => n + l.length + 1, 0);
  if (size(full) <= budget) return full.join("\n");
  const short = skills.map((s) =>
    skillLine(
      s,
      s.description.length > SHORT_DESCRIPTION
        ? s.description.slice(0, SHORT_DESCRIPTION - 3) + "..."
        : s.description,
    )
  );
  const warn = `(warning: skill descriptions shortened to ${SHORT_DESCRIPTION} characters ` +
    `to fit the skills budget of ${budget} characters)`;
  const kept: string[] = [];
  let used = warn.length + 1;
  for (const l of short) {
    if (used + l.length + 1 > budget) break;
    kept.push(l);
    used += l.length + 1;
  }
  const omitted = short.length - kept.length;
  if (omitted === 0) return [...kept, warn].join("\n");
  return [
    ...kept,
    `(warning: ${omitted} of ${skills.length} skills omitted: their metadata is over the ` +
    `skills budget of ${budget} characters)`,
  ].join("\n");
}

/** One loaded tool of the agent's tsh state (metadata only). */
export interface LoadedTool {
  name: string;
  description: string;
  pinned: boolean;
}

/** Longest tool description in the tool injection block. */
export const MAX_TOOL_DESCRIPTION = 240;

/**
 * The tool injection block: tools loaded (`tsh load`) or pinned (`tsh pin`), one line each,
 * pinned first; descriptions cut at {@link MAX_TOOL_DESCRIPTION}. Metadata only: it grants nothing.
 */
export function toolBlock(tools: readonly LoadedTool[]): string {
  if (tools.length === 0) return EMPTY.tool_injection;
  const sorted = [...tools.filter((t) => t.pinned), ...tools.filter((t) => !t.pinned)];
  const lines = sorted.map((t) => {
    const d = t.description.replace(/\s+/g, " ").trim();
    const cut = d.length > MAX_TOOL_DESCRIPTION ? d.slice(0, MAX_TOOL_DESCRIPTION - 3) + "..." : d;
    return `- ${t.name}${t.pinned ? " (pinned)" : ""}: ${cut}`;
  });
  return ["Loaded tools (call them through tsh, e.g. tsh TOOL ARGS):", ...lines].join("\n");
}

/** A conservative token estimate of text: its UTF-8 bytes / 4, rounded up (spec/prompt.md). */
export function estimateTokens(text: string): number {
  return Math.ceil(new TextEncoder().encode(text).length / 4);
}
