/** What the prompt gathers from the agent's directories: AGENTS.md rules, skill metadata, the tsh tool context. */
import { type LoadedTool, MAX_RULE_FILE, type RuleFile, type Skill } from "../abi/prompt.ts";
import { CtxError } from "../abi/errno.ts";
import { parseState } from "../tool/state.ts";
import type { Source } from "./source.ts";

/** Where the agent's files are: its home (HOME=/home/agent) and the workspace, and its cwd. */
export interface Places {
  home?: Source;
  workspace?: Source;
  /** The run's cwd as the agent sees it (`/workspace/sub`): AGENTS.md and skills of its ancestors count. */
  cwd: string;
}

/** Directories from the workspace root down to the cwd, relative (`""`, `sub`, `sub/deeper`). */
export function ancestors(workspace: string, cwd: string): string[] {
  const out = [""];
  if (cwd !== workspace && !cwd.startsWith(`${workspace}/`)) return out;
  const parts = cwd.slice(workspace.length).split("/").filter((c) => c !== "" && c !== ".");
  if (parts.includes("..")) return out;
  for (let i = 1; i <= parts.length; i++) out.push(parts.slice(0, i).join("/"));
  return out;
}

function join(at: string, rel: string): string {
  return rel === "" ? at : `${at}/${rel}`;
}

/** Global AGENTS.md files in the agent home, in this order (then the workspace's). */
export const HOME_RULES = [".codex/AGENTS.md", ".agents/AGENTS.md", "AGENTS.md"] as const;

/**
 * AGENTS.md files, de-duplicated, in the order the merged rules use: the agent home's
 * {@link HOME_RULES}, then `AGENTS.md` of each directory from the workspace root down to the
 * cwd. Each is read (bounded, regular files only, nothing followed) through its {@link Source}.
 */
export function discoverRules(p: Places): RuleFile[] {
  const out: RuleFile[] = [];
  const seen = new Set<string>();
  const add = (s: Source | undefined, rel: string) => {
    if (!s) return;
    const path = join(s.at, rel);
    if (seen.has(path)) return;
    seen.add(path);
    const r = s.read(rel, MAX_RULE_FILE);
    if (r && r.text.trim() !== "") out.push({ path, text: r.text, truncated: r.truncated });
  };
  for (const rel of HOME_RULES) add(p.home, rel);
  if (p.workspace) {
    for (const dir of ancestors(p.workspace.at, p.cwd)) {
      add(p.workspace, join(dir, "AGENTS.md").replace(/^\//, ""));
    }
  }
  return out;
}

/** Bounds of the skill search. */
export const SKILL_SEARCH = { depth: 4, dirs: 512, skills: 128, head: 8192 } as const;

/** Skill roots below each searched directory. */
const SKILL_DIRS = [".agents/skills", ".codex/skills"];

/** `name` and `description` of a SKILL.md's YAML front matter (`key: value` lines only). */
export function frontMatter(text: string): { name?: string; description?: string } {
  const m = /^---\r?\n([\s\S]*?)\r?\n---(\r?\n|$)/.exec(text);
  if (!m) return {};
  const out: { name?: string; description?: string } = {};
  for (const line of m[1].split(/\r?\n/)) {
    const kv = /^(name|description):\s*(.*)$/.exec(line);
    if (!kv) continue;
    let v = kv[2].trim();
    if (/^(["']).*\1$/.test(v)) v = v.slice(1, -1);
    out[kv[1] as "name" | "description"] = v;
  }
  return out;
}

/**
 * Skill metadata: every directory holding a `SKILL.md` below `.agents/skills` and `.codex/skills`
 * of the agent home, then of each workspace directory from the root down to the cwd (depth,
 * directory and skill counts bounded by {@link SKILL_SEARCH}; no symlink is followed). Name and
 * description come from the front matter (name: the directory name when absent). A name seen
 * before is skipped. Only the head of SKILL.md is read; its body is the agent's to open.
 */
export function discoverSkills(p: Places): Skill[] {
  const out: Skill[] = [];
  const names = new Set<string>();
  let visited = 0;
  const walk = (s: Source, rel: string, depth: number) => {
    if (out.length >= SKILL_SEARCH.skills || visited >= SKILL_SEARCH.dirs) return;
    visited++;
    const head = s.read(`${rel}/SKILL.md`, SKILL_SEARCH.head);
    if (head) {
      const fm = frontMatter(head.text);
      const name = (fm.name || rel.slice(rel.lastIndexOf("/") + 1)).replace(/\s+/g, " ").slice(
        0,
        64,
      );
      if (!names.has(name)) {
        names.add(name);
        const description = (fm.description ?? "").replace(/\s+/g, " ").trim().slice(0, 1024);
        out.push({ name, description, path: `${s.at}/${rel}/SKILL.md` });
      }
      return; // a skill's own subdirectories are its files, not more skills
    }
    if (depth >= SKILL_SEARCH.depth) return;
    for (const d of s.dirs(rel)) walk(s, `${rel}/${d}`, depth + 1);
  };
  const roots: [Source, string][] = [];
  if (p.home) { for (const d of SKILL_DIRS) roots.push([p.home, d]); }
  if (p.workspace) {
    for (const a of ancestors(p.workspace.at, p.cwd)) {
      for (const d of SKILL_DIRS) roots.push([p.workspace, a === "" ? d : `${a}/${d}`]);
    }
  }
  for (const [s, root] of roots) for (const d of s.dirs(root)) walk(s, `${root}/${d}`, 1);
  return out;
}

/** The tsh state file in the agent home, read at most this many bytes. */
const MAX_STATE = 256 * 1024;

/**
 * The tools `tsh load`/`tsh pin` put in the agent's tool context (`~/.tsh/state.json`), names and
 * descriptions only. No file: none. A corrupt or oversized file is EIO (never silently reset).
 */
export function loadedTools(home: Source | undefined): LoadedTool[] {
  const r = home?.read(".tsh/state.json", MAX_STATE);
  if (!r || !home) return [];
  const path = `${home.at}/.tsh/state.json`;
  if (r.truncated) throw new CtxError("EIO", `tsh state is over ${MAX_STATE} bytes`, { path });
  return parseState(r.text, path).loaded.map((l) => ({
    name: String(l.name),
    description: String(l.description ?? ""),
    pinned: l.pinned === true,
  }));
}
