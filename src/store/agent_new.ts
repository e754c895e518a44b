/** `ctx agent new`: a whole new agent object, validated first, its entry file written last. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { checkName } from "../abi/names.ts";
import { controlMode, controlSpec } from "../abi/controls.ts";
import { checkWindow, parseWindow } from "../abi/window.ts";
import { replaceFile, syncDir } from "./atomic.ts";
import { loadModel, resolveModel } from "./agent.ts";
import { agentControls, agentEntry, makeAgentHome, makeDir, writeAll } from "./tree.ts";

/** The label of agents made by `ctx agent new` (subject `agent_t`, which the built-in tools allow). */
export const NEW_AGENT_LABEL = "user_u:agent_r:agent_t:s0";

/** Largest program `--exec` installs (it is copied into the tree). */
export const MAX_PROGRAM_BYTES = 64 * 1024 * 1024;

/** Options for {@link createAgent}. */
export interface NewAgentOptions {
  /** Model reference (`provider/model` or an alias); default: the concrete target of `model/main`. */
  model?: string;
  /** Capability ceiling triplet; default `rwx`. */
  perm?: string;
  /** `auto` or a token count not above the model's known limit; default `auto`. */
  window?: string;
  /** Label; default {@link NEW_AGENT_LABEL}. */
  label?: string;
  /** Owner (and runtime uid/gid) of the new agent. */
  uid: number;
  gid: number;
  /** Path of a program to install as the executable `agent/<name>` (abi sdk-envelope-v1). */
  exec?: string;
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw toCtxError(e, path);
  }
}

/** EINVAL for a bad name, EEXIST for an agent there or an interrupted creation of one. */
function checkNew(root: string, name: string): void {
  const path = `agent/${name}`;
  try {
    checkName(name, { kind: "agent" });
  } catch (e) {
    throw new CtxError("EINVAL", (e as Error).message, { path });
  }
  if (exists(`${root}/${path}`)) {
    throw new CtxError("EEXIST", `agent "${name}" already exists`, { path });
  }
  if (exists(`${root}/${path}.d`)) {
    throw new CtxError(
      "EEXIST",
      `${path}.d exists without ${path}: an interrupted creation; remove ${path}.d to retry`,
      { path: `${path}.d` },
    );
  }
}

/** The new agent's control files, each parsed, and the window checked against its model's limit. */
function newControls(
  root: string,
  name: string,
  options: NewAgentOptions,
): Record<string, string> {
  const path = `agent/${name}`;
  // The model must exist (aliases resolved); the policy grants use of the concrete model.
  let model: string, concrete: string;
  try {
    model = options.model ?? resolveModel(root, "main");
    concrete = resolveModel(root, model);
  } catch (e) {
    const err = toCtxError(e);
    throw new CtxError(err.errno, err.message, { path: `${path}.d/model` });
  }
  const window = options.window ?? "auto";
  const controls = agentControls(name, {
    uid: options.uid,
    gid: options.gid,
    label: options.label ?? NEW_AGENT_LABEL,
    model,
    perm: options.perm ?? "rwx",
    window,
    policyModel: concrete,
  });
  for (const [control, text] of Object.entries(controls)) {
    try {
      controlSpec("agent", control).parse(text);
    } catch (e) {
      const err = toCtxError(e);
      throw new CtxError(err.errno, err.message, { path: `${path}.d/${control}` });
    }
  }
  // The cross-file invariant: an explicit window needs the model's known limit not below it.
  try {
    checkWindow(parseWindow(`${window}\n`), loadModel(root, concrete).limit, model);
  } catch (e) {
    throw new CtxError("EINVAL", (e as Error).message, { path: `${path}.d/window` });
  }
  return controls;
}

/** The bytes of the program `exec` names (`--exec`): a regular file, at most MAX_PROGRAM_BYTES. */
function program(exec: string): Uint8Array {
  try {
    const st = Deno.statSync(exec);
    if (!st.isFile) throw new CtxError("EINVAL", "--exec must name a regular file");
    if (st.size > MAX_PROGRAM_BYTES) {
      throw new CtxError("EFBIG", `program is ${st.size} bytes (at most ${MAX_PROGRAM_BYTES})`);
    }
    return Deno.readFileSync(exec);
  } catch (e) {
    const err = toCtxError(e);
    throw new CtxError(err.errno, err.message, { path: exec, cause: e });
  }
}

/**
 * Creates `agent/<name>` for `options.uid`. Every name and value (and the window/limit invariant)
 * is checked before the first write. The controls go into `agent/<name>.d/` first and the entry
 * `agent/<name>` is renamed into place last, so a crash never leaves an agent that looks complete.
 */
export function createAgent(root: string, name: string, options: NewAgentOptions): string {
  const path = `agent/${name}`;
  checkNew(root, name);
  const controls = newControls(root, name, options);
  const entry = options.exec === undefined
    ? new TextEncoder().encode(agentEntry(name))
    : program(options.exec);

  // Nothing was written so far; from here on, a failure removes what this call made.
  // The definition files are the caller's: root's on the storage tree (only root can write it),
  // and root's through the mount too (the daemon writes them). `owner` says whose agent it is;
  // only the home below home/<uid>/ is the uid's.
  const id = { uid: options.uid, gid: options.gid };
  let made = false;
  try {
    Deno.mkdirSync(`${root}/${path}.d`, { mode: 0o755 });
    made = true;
    makeDir(`${root}/${path}.d`, { mode: 0o755 });
    // A secret control (`env`) is born 0600: readable by root and, through the mount, the owner.
    writeAll(`${root}/${path}.d`, controls, { modeOf: (c) => controlMode("agent", c) });
    makeAgentHome(root, name, id);
    replaceFile(`${root}/${path}`, entry, { mode: 0o755 });
    syncDir(`${root}/agent`);
  } catch (e) {
    if (made && !exists(`${root}/${path}`)) {
      try {
        Deno.removeSync(`${root}/${path}.d`, { recursive: true });
      } catch {
        /* any kind: the real error is thrown next; a leftover .d reads as an interrupted creation */
      }
    }
    throw toCtxError(e, path);
  }
  return path;
}
