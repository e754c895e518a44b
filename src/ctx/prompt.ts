/** `ctx agent prompt NAME`: the agent's first system message through the runtime's own renderer, with token estimates. */
import { estimateTokens } from "../abi/prompt.ts";
import type { ChatMessage } from "../model/driver.ts";
import { admit, jsonBytes, turnsOf } from "../prompt/admit.ts";
import { offerTools } from "../prompt/offer.ts";
import { renderPrompt } from "../prompt/render.ts";
import { dirSource } from "../prompt/source.ts";
import { effectiveWindow, loadAgent, loadModel } from "../store/agent.ts";
import { readRecords } from "../store/jsonl.ts";
import { pickSession } from "./client.ts";
import { ignore } from "../abi/errno.ts";

/** Options of `ctx agent prompt`. */
export interface PromptArgs {
  session?: string;
  cwd?: string;
}

/** The session's earlier user/assistant messages, oldest first (none when it has no history). */
function storedHistory(path: string): ChatMessage[] {
  let records: unknown[];
  try {
    records = readRecords(path);
  } catch (e) {
    ignore(e, "EIO", "EFBIG");
    return [];
  }
  const out: ChatMessage[] = [];
  for (const r of records as { role?: string; content?: unknown }[]) {
    if (r.role !== "user" && r.role !== "assistant") continue;
    const c = r.content;
    const text = typeof c === "string"
      ? c
      : Array.isArray(c)
      ? c.map((p) => (typeof p?.text === "string" ? p.text : "")).join("")
      : "";
    out.push({ role: r.role, content: text });
  }
  return out;
}

/**
 * Prints the prompt a run of `name` would send now: the rendered system message on stdout
 * (exactly), then on stderr the per-category estimates (UTF-8 bytes / 4): system message,
 * AGENTS.md rules, skills, tools (injection block + offered schemas), admitted history, total.
 * The workspace is this process's cwd; the session's history (--session, else the current one)
 * is admitted with the same function the runtime uses.
 */
export function prompt(root: string, name: string, o: PromptArgs): number {
  const agent = loadAgent(root, name, { secrets: false });
  let window: number | undefined;
  try {
    window = effectiveWindow(agent, loadModel(root, agent.model));
  } catch (e) {
    ignore(e, "ENOENT", "EINVAL");
    window = undefined;
  }
  const id = { uid: agent.uid, gid: agent.gid, groups: agent.groups };
  const home = dirSource(`${root}/home/${agent.uid}/agent/${agent.name}`, {
    at: "/home/agent",
    id,
  });
  const workspace = dirSource("/proc/self/cwd", { at: "/workspace", id });
  const session = pickSession(root, agent.uid, agent.name, o.session);
  let p;
  try {
    p = renderPrompt({
      agent: agent.name,
      model: agent.model,
      session,
      system: agent.system,
      template: agent.template,
      places: { home, workspace, cwd: o.cwd ?? agent.cwd },
      window,
    });
  } finally {
    home?.close();
    workspace?.close();
  }
  Deno.stdout.writeSync(new TextEncoder().encode(p.system));
  const tools = offerTools(root, agent.tools).specs;
  const system: ChatMessage = { role: "system", content: p.system };
  const past = storedHistory(
    `${root}/home/${agent.uid}/agent/${agent.name}/session/${session}/messages.jsonl`,
  );
  let history = 0;
  let total = Math.ceil((jsonBytes([system]) + jsonBytes(tools)) / 4);
  let note = "";
  try {
    const a = admit({ system, history: turnsOf(past), current: [], tools }, window, agent.model);
    history = Math.ceil((a.used - jsonBytes([system]) - jsonBytes(tools)) / 4);
    total = Math.ceil(a.used / 4);
    note = a.dropped ? ` (${a.dropped} older turns left out)` : "";
  } catch (e) {
    note = ` (${(e as Error).message})`;
  }
  const rows = [
    ["system", estimateTokens(p.system)],
    ["agents_md", estimateTokens(p.rules)],
    ["skills", estimateTokens(p.skills)],
    ["tools", estimateTokens(p.tools) + Math.ceil(jsonBytes(tools) / 4)],
    ["history", history],
    ["total", total],
  ];
  const lines = [
    "",
    `# token estimates (UTF-8 bytes / 4); session ${session}${note}`,
    ...rows.map(([k, v]) => `${k}\t${v}`),
    `# window: ${window === undefined ? "unknown" : `${window} tokens`} (${agent.model}); ` +
    "runtime-only at run time: the user's input and this run's tool results",
  ];
  console.error(lines.join("\n"));
  return 0;
}
