/** The tree's shape by migration: the initial tree (v1: root, model, tools, default agent), tsh's config (v2). */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { DEFAULT_TEMPLATE } from "../abi/prompt.ts";
import { BUILTIN_TOOLS, toolEntry, toolPolicy } from "../abi/builtin.ts";
import { parseTshConfig } from "../abi/tshconfig.ts";
import { ensureDir, replaceFile, syncDir } from "./atomic.ts";
import { ensureAgentHome, mkdirOnce } from "./session/claim.ts";
import { asOwner } from "./session/ref.ts";

/** The root entries of every generation, in `ls` order of the spec; nothing else may sit at the root. */
export const ROOT_ENTRIES = ["status", "bin", "model", "agent", "tool", "home", "shared"] as const;

/** The shebang that marks inspectable object metadata (the runner is built in, the file is never code). */
export const OBJECT_RUNNER = "#!/usr/bin/cortexfs-object-runner";

/** The built-in test model and its known context limit (tokens). */
export const ECHO_MODEL = { ref: "debug/echo", limit: 131072 } as const;

/** The default agent's name and label. */
export const DEFAULT_AGENT = { name: "coder", label: "user_u:agent_r:coder_t:s0" } as const;

/** Who the tree is built for and when. */
export interface TreeContext {
  /** The creating uid: owner of the default agent and of `home/<uid>/`. */
  uid: number;
  /** The creating gid. */
  gid: number;
  /** Creation time, unix seconds (model metadata `created_at`). */
  now: number;
}

/** The default first-system-message template (`prompt.template.md` of a new agent). */
export { DEFAULT_TEMPLATE };

/** `model/<p>/<m>` metadata text: the keys of spec-digest 4 (one-shot exec metadata). */
export function modelEntry(
  ref: string,
  options: { limit: number | "unknown"; now: number; description?: string },
): string {
  const name = ref.slice(ref.indexOf("/") + 1);
  return [
    OBJECT_RUNNER,
    `id=${ref}`,
    `name=${name}`,
    `description=${options.description ?? "Built-in test model: answers with its input."}`,
    `type=model`,
    `created_at=${options.now}`,
    `owned_by=cortexfs`,
    `context_length=${options.limit}`,
    "",
  ].join("\n");
}

/** `agent/<name>` metadata text of a model-backed agent (no program installed). */
export function agentEntry(name: string): string {
  return `${OBJECT_RUNNER}\nkind=agent\nname=${name}\n`;
}

/** The policy granting `subject` execute on every built-in tool and use of `model`. */
export function defaultPolicy(subject: string, model: string): string {
  const tools = BUILTIN_TOOLS.map((t) => `allow ${subject} tool:${t.name} execute\n`).join("");
  return tools + `allow ${subject} model:${model} use\n`;
}

/** The controls of a new agent as `{control: bytes}`; callers override single values. */
export function agentControls(
  name: string,
  options: {
    uid: number;
    gid: number;
    label: string;
    model: string;
    perm: string;
    window: string;
    policyModel: string;
  },
): Record<string, string> {
  const subject = options.label.split(":")[2];
  return {
    owner: `${options.uid}\n`,
    uid: `${options.uid}\n`,
    gid: `${options.gid}\n`,
    groups: "",
    label: `${options.label}\n`,
    cwd: "/workspace\n",
    env: "",
    path: `/ctx/tool\n/ctx/home/${options.uid}/tool\n`,
    mount: "",
    model: `${options.model}\n`,
    window: `${options.window}\n`,
    perm: `${options.perm}\n`,
    abi: "sdk-envelope-v1\n",
    approval: "auto\n",
    tools: "",
    policy: defaultPolicy(subject, options.policyModel),
    "system.md": `You are ${name}, an agent of CortexFS working in /workspace.\n`,
    "prompt.template.md": DEFAULT_TEMPLATE,
    "meta.json": `${JSON.stringify({ name })}\n`,
    status: "dead\n",
    pid: "",
    log: "",
  };
}

/**
 * Writes `files` (`{name: bytes}`) into `dir` with atomic replaces, then fsyncs `dir`. Each file
 * gets `modeOf(name)` when given, else `mode` (default 0644).
 */
export function writeAll(
  dir: string,
  files: Record<string, string>,
  options: { mode?: number; modeOf?: (name: string) => number; uid?: number; gid?: number } = {},
): void {
  for (const [name, data] of Object.entries(files)) {
    const mode = options.modeOf?.(name) ?? options.mode ?? 0o644;
    replaceFile(`${dir}/${name}`, data, { mode, ...owner(options) });
  }
  syncDir(dir);
}

function owner(o: { uid?: number; gid?: number }): { uid?: number; gid?: number } {
  return o.uid === undefined ? {} : { uid: o.uid, gid: o.gid };
}

/**
 * Makes a directory with an exact mode and owner (root only changes ownership). Definitions
 * (`agent/`, `tool/`, `model/`, `bin/`) never pass an owner: they are the tree's, i.e. root's.
 */
export function makeDir(
  dir: string,
  options: { mode?: number; uid?: number; gid?: number } = {},
): void {
  ensureDir(dir, options.mode ?? 0o755);
  Deno.chmodSync(dir, options.mode ?? 0o755);
  if (options.uid !== undefined && Deno.uid() === 0) {
    Deno.chownSync(dir, options.uid, options.gid ?? options.uid);
  }
}

/** Makes `home/<uid>/` and the skeleton of one agent home below it. */
export function makeAgentHome(root: string, name: string, ctx: { uid: number; gid: number }): void {
  // Root makes only home/<uid> and gives it away; the rest is made as the uid, so a symlink the
  // user planted under its home never leads root anywhere (src/store/session/claim.ts).
  const home = ensureAgentHome(root, { uid: ctx.uid, gid: ctx.gid, agent: name });
  asOwner(ctx, () => {
    for (const d of ["model", "tool"]) mkdirOnce(`${root}/home/${ctx.uid}/${d}`, 0o755);
    mkdirOnce(`${home}/session`, 0o700);
  });
}

/**
 * Builds the initial tree into the empty directory `dir` (migration 1, `initial-tree`).
 * `bin/cortexfs.bootstrap.json` is not written here: the update writes it last.
 */
export function buildInitialTree(dir: string, ctx: TreeContext): void {
  let entries: string[];
  try {
    entries = [...Deno.readDirSync(dir)].map((e) => e.name);
  } catch (e) {
    throw toCtxError(e, dir);
  }
  if (entries.length > 0) {
    throw new CtxError("EEXIST", `initial-tree needs an empty directory, found "${entries[0]}"`, {
      path: dir,
    });
  }
  replaceFile(`${dir}/status`, "state=offline\n", { mode: 0o444 });
  for (const d of ["bin", "model", "agent", "tool", "home", "shared"]) makeDir(`${dir}/${d}`);

  // The built-in model and its alias `main`.
  const [provider] = ECHO_MODEL.ref.split("/");
  makeDir(`${dir}/model/${provider}`);
  makeDir(`${dir}/model/${ECHO_MODEL.ref}.d`);
  writeAll(`${dir}/model/${ECHO_MODEL.ref}.d`, {
    driver: "debug\n",
    cap: "chat\nstream\n",
    limit: `${ECHO_MODEL.limit}\n`,
    fallback: "",
    session: "none\n",
    effort: "auto\n",
  });
  replaceFile(
    `${dir}/model/${ECHO_MODEL.ref}`,
    modelEntry(ECHO_MODEL.ref, { ...ctx, ...ECHO_MODEL }),
    {
      mode: 0o555,
    },
  );
  Deno.symlinkSync(ECHO_MODEL.ref, `${dir}/model/main`);
  syncDir(`${dir}/model`);

  // The six built-in tools: controls first, the executable entry last.
  for (const t of BUILTIN_TOOLS) {
    makeDir(`${dir}/tool/${t.name}.d`);
    writeAll(`${dir}/tool/${t.name}.d`, {
      name: `${t.name}\n`,
      description: `${t.description}\n`,
      schema: `${JSON.stringify(t.schema, null, 2)}\n`,
      cap: t.cap.map((c) => `${c}\n`).join(""),
      policy: toolPolicy(t),
      status: "ready\n",
      log: "",
    });
    replaceFile(`${dir}/tool/${t.name}`, toolEntry(t), { mode: 0o755 });
  }

  // The default agent: its `owner` control names the creating uid; its definition files are the
  // tree's (root's), so nobody edits them behind the control rules. Entry written last.
  const id = { uid: ctx.uid, gid: ctx.gid };
  const name = DEFAULT_AGENT.name;
  makeDir(`${dir}/agent/${name}.d`);
  writeAll(
    `${dir}/agent/${name}.d`,
    agentControls(name, {
      ...id,
      label: DEFAULT_AGENT.label,
      model: ECHO_MODEL.ref,
      perm: "rwx",
      window: "auto",
      policyModel: ECHO_MODEL.ref,
    }),
  );
  replaceFile(`${dir}/agent/${name}`, agentEntry(name), { mode: 0o755 });
  makeAgentHome(dir, name, id);
  syncDir(`${dir}/agent`);
  syncDir(dir);
}

/** `tool/tsh.d/config` as migration 2 writes it: the defaults of spec-digest 6.3, as data. */
export const TSH_CONFIG =
  "# tsh load/pin bounds (spec/tool-policy.md); CTX_TOOL_CACHE overrides cache_capacity\n" +
  "cache_capacity=32\nmax_loaded_tools=64\nwindow_percent=1\n";

/**
 * Adds `tool/tsh.d/config` (migration 2, `tsh-config`). A config already present is the operator's
 * and is kept when it parses; a malformed one fails the migration (EINVAL), so the update leaves
 * `current` untouched rather than guessing.
 */
export function addTshConfig(dir: string, _ctx: TreeContext): void {
  const path = `${dir}/tool/tsh.d/config`;
  let text: string | undefined;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, path);
  }
  if (text !== undefined) {
    try {
      parseTshConfig(text);
    } catch (e) {
      throw new CtxError(
        "EINVAL",
        `tsh-config keeps an existing config only when it is valid: ${toCtxError(e).message}`,
        { path: "tool/tsh.d/config" },
      );
    }
    return;
  }
  makeDir(`${dir}/tool/tsh.d`);
  writeAll(`${dir}/tool/tsh.d`, { config: TSH_CONFIG });
}
