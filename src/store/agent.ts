/** Loads agent, model and tool definitions from a tree, re-reading and parsing every control fresh. */
import { catalogLimit } from "../abi/catalog.ts";
import { hostLimit } from "./providers.ts";
import {
  type Abi,
  AGENT_CONTROLS,
  type Approval,
  checkName,
  type ControlSpec,
  CtxError,
  type Driver,
  effectiveTokens,
  type Effort,
  isSecretControl,
  type JsonObject,
  type Label,
  type Limit,
  MAX_CONTROL_BYTES,
  MODEL_CONTROLS,
  type MountEntry,
  type Perm,
  type PolicyRule,
  quote,
  type Rlimits,
  type Session,
  toCtxError,
  TOOL_CONTROLS,
  type Window,
} from "../abi/mod.ts";

/** An agent definition: `agent/<name>` + `agent/<name>.d/`, parsed, with defaults applied. */
export interface AgentDef {
  /** The agent's own name (an alias such as `main` resolved). */
  name: string;
  /** Absolute path of the control directory. */
  dir: string;
  owner: number;
  /** Runtime uid; default: owner. */
  uid: number;
  /** Runtime gid; default: owner (user private group). */
  gid: number;
  /** Supplementary gids; default none. */
  groups: number[];
  label: Label;
  /** The policy subject: the label's type. */
  subject: string;
  /** chroot root; absent = none. */
  root?: string;
  /** Start dir; default `/workspace`. */
  cwd: string;
  /** Literal environment; default empty (and empty when loaded with `secrets: false`: not read). */
  env: Record<string, string>;
  /** Tool dirs for CTX_PATH; default `/ctx/tool`, `/ctx/home/<uid>/tool`. */
  path: string[];
  /** Mount table; default empty. */
  mount: MountEntry[];
  /** Model reference as written (may be an alias). */
  model: string;
  /** Default `auto`. */
  window: Window;
  perm: Perm;
  abi: Abi;
  /** Default `auto`. */
  approval: Approval;
  /** Resource limits below the defaults; default none (the defaults hold). */
  rlimit: Partial<Rlimits>;
  /** Direct-native tools besides tsh; default none. */
  tools: string[];
  /** Agent policy; default none (deny everything). */
  policy: PolicyRule[];
  /** `system.md`; default empty. */
  system: string;
  /** `prompt.template.md`; absent = the renderer's built-in template. */
  template?: string;
  /** `meta.json`; default `{}`. */
  meta: JsonObject;
}

/** A model definition: `model/<provider>/<model>.d/`, parsed, with defaults applied. */
export interface ModelDef {
  /** Canonical `<provider>/<model>` after alias resolution. */
  ref: string;
  provider: string;
  model: string;
  /** The provider's name for it: the `id` control, else {@link model}. */
  id: string;
  /** Absolute path of the control directory. */
  dir: string;
  /** Default `unknown`. */
  limit: Limit;
  driver: Driver;
  /** Default none. */
  cap: string[];
  /** Default none. */
  fallback: string[];
  /** Default `none`. */
  session: Session;
  /** Default `auto`. */
  effort: Effort;
}

/** A tool definition: `<dir>/<name>.d/`, parsed. */
export interface ToolDef {
  name: string;
  /** Absolute path of the control directory. */
  dir: string;
  description: string;
  schema: JsonObject;
  cap: string[];
  policy: PolicyRule[];
}

const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Whether `path` is a real directory (symlinks are not followed). */
function isDir(path: string): boolean {
  try {
    return Deno.lstatSync(path).isDirectory;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return false;
    throw toCtxError(e, path);
  }
}

/**
 * Reads and parses one control of `dir`. Absent: undefined. A symlink, a non-file, bytes over
 * 64 KiB, invalid UTF-8 or a format error throw CtxError with the file's path.
 */
export function readControl<T>(dir: string, name: string, spec: ControlSpec): T | undefined {
  const path = `${dir}/${name}`;
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw toCtxError(e, path);
  }
  if (!st.isFile) throw new CtxError("EINVAL", `"${name}" is not a regular file`, { path });
  if (st.size > MAX_CONTROL_BYTES) {
    throw new CtxError("EMSGSIZE", `"${name}": ${st.size} bytes is over the limit`, { path });
  }
  let text: string;
  try {
    text = dec.decode(Deno.readFileSync(path));
  } catch (e) {
    if (e instanceof TypeError) throw new CtxError("EINVAL", `"${name}" is not UTF-8`, { path });
    throw toCtxError(e, path);
  }
  try {
    return spec.parse(text) as T;
  } catch (e) {
    const err = toCtxError(e, path);
    throw new CtxError(err.errno, err.message, { path });
  }
}

/** Like {@link readControl}, but an absent (required) control is ENOENT. */
function need<T>(dir: string, name: string, table: Record<string, ControlSpec>): T {
  const v = readControl<T>(dir, name, table[name]);
  if (v === undefined) {
    throw new CtxError("ENOENT", `required control "${name}" is missing`, {
      path: `${dir}/${name}`,
    });
  }
  return v;
}

/**
 * Follows alias symlinks inside the class directory `cls` (`<root>/agent`, `<root>/model`):
 * `rel` is the name below it. Relative targets resolve against the link's directory; absolute
 * targets must lie under `root` or `/ctx` (the mount inside a sandbox). Returns the real name.
 */
function followAlias(root: string, cls: string, rel: string, what: string): string {
  let name = rel;
  for (let hop = 0; hop < 8; hop++) {
    const path = `${root}/${cls}/${name}`;
    let st: Deno.FileInfo;
    try {
      st = Deno.lstatSync(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return name;
      throw toCtxError(e, path);
    }
    if (!st.isSymlink) return name;
    const target = Deno.readLinkSync(path);
    let parts: string[];
    if (target.startsWith("/")) {
      const base = [`${root}/${cls}/`, `/ctx/${cls}/`].find((b) => target.startsWith(b));
      if (!base) {
        throw new CtxError("EINVAL", `alias ${quote(name)} points outside ${cls}/`, { path });
      }
      parts = target.slice(base.length).split("/");
    } else {
      parts = [...name.split("/").slice(0, -1), ...target.split("/")];
    }
    const out: string[] = [];
    for (const p of parts) {
      if (p === "" || p === ".") continue;
      if (p === "..") {
        if (out.length === 0) {
          throw new CtxError("EINVAL", `alias ${quote(name)} points outside ${cls}/`, { path });
        }
        out.pop();
      } else out.push(p);
    }
    name = out.join("/");
    checkName(name, { kind: what === "agent" ? "agent" : "model" });
  }
  throw new CtxError("ELOOP", `${what} alias ${quote(rel)} has more than 8 hops`);
}

/** The real name of agent `name` (an alias such as `agent/main -> coder` resolved). */
export function resolveAgent(root: string, name: string): string {
  checkName(name, { kind: "agent" });
  const real = followAlias(root, "agent", name, "agent");
  if (real.includes("/")) throw new CtxError("EINVAL", `agent alias ${quote(name)} is not a name`);
  if (!isDir(`${root}/agent/${real}.d`)) {
    throw new CtxError("ENOENT", `no agent ${quote(name)}`, { path: `agent/${real}.d` });
  }
  return real;
}

/** The canonical `<provider>/<model>` of `ref` (aliases such as `model/main` resolved); ENOENT if none. */
export function resolveModel(root: string, ref: string): string {
  checkName(ref, { kind: "model" });
  const real = followAlias(root, "model", ref, "model");
  if (!real.includes("/") || !isDir(`${root}/model/${real}.d`)) {
    throw new CtxError("ENOENT", `no model ${quote(ref)}`, { path: `model/${real}.d` });
  }
  return real;
}

/** Options for {@link loadAgent}. */
export interface LoadAgentOptions {
  /**
   * Read the secret controls (`env`; default true). Authority checks and callers that need only
   * the identity pass false: `env` is readable only by root and the agent's owner, and a tool
   * running as the agent uid (or another user asking about an agent) must not need it.
   */
  secrets?: boolean;
}

/** Loads agent `name` from the tree at `root`, every control parsed fresh. */
export function loadAgent(root: string, name: string, options: LoadAgentOptions = {}): AgentDef {
  const real = resolveAgent(root, name);
  const dir = `${root}/agent/${real}.d`;
  const secrets = options.secrets ?? true;
  const get = <T>(c: string): T | undefined =>
    !secrets && isSecretControl("agent", c) ? undefined : readControl<T>(dir, c, AGENT_CONTROLS[c]);
  const req = <T>(c: string): T => need<T>(dir, c, AGENT_CONTROLS);
  const owner = req<number>("owner");
  const uid = get<number>("uid") ?? owner;
  const label = req<Label>("label");
  return {
    name: real,
    dir,
    owner,
    uid,
    gid: get<number>("gid") ?? owner,
    groups: get<number[]>("groups") ?? [],
    label,
    subject: label.type,
    root: get<string>("root"),
    cwd: get<string>("cwd") ?? "/workspace",
    env: get<Record<string, string>>("env") ?? {},
    path: get<string[]>("path") ?? ["/ctx/tool", `/ctx/home/${uid}/tool`],
    mount: get<MountEntry[]>("mount") ?? [],
    model: req<string>("model"),
    window: get<Window>("window") ?? "auto",
    perm: req<Perm>("perm"),
    abi: req<Abi>("abi"),
    approval: get<Approval>("approval") ?? "auto",
    rlimit: get<Partial<Rlimits>>("rlimit") ?? {},
    tools: get<string[]>("tools") ?? [],
    policy: get<PolicyRule[]>("policy") ?? [],
    system: get<string>("system.md") ?? "",
    template: get<string>("prompt.template.md"),
    meta: get<JsonObject>("meta.json") ?? {},
  };
}

/**
 * A model's known limit, by precedence (spec/models.md §1): host configuration (the providers.d
 * file of `<provider>`, `model_limits` of the native id, then the model's stored `limit` file,
 * root's), then the built-in catalog under `<provider>/<id>`, then `unknown`. The native id is the
 * `id` control, else the model component.
 */
export function knownLimit(
  dir: string,
  provider: string,
  model: string,
  id = readControl<string>(dir, "id", MODEL_CONTROLS.id) ?? model,
): Limit {
  const host = hostLimit(provider, id);
  if (host !== undefined) return host;
  const own = readControl<Limit>(dir, "limit", MODEL_CONTROLS.limit);
  if (own !== undefined) return own;
  return catalogLimit(provider, id) ?? "unknown";
}

/** Loads model `ref` (`<provider>/<model>` or an alias) from the tree at `root`. */
export function loadModel(root: string, ref: string): ModelDef {
  const real = resolveModel(root, ref);
  const dir = `${root}/model/${real}.d`;
  const get = <T>(c: string): T | undefined => readControl<T>(dir, c, MODEL_CONTROLS[c]);
  const [provider, model] = real.split("/");
  const id = get<string>("id") ?? model;
  return {
    ref: real,
    provider,
    model,
    id,
    dir,
    limit: knownLimit(dir, provider, model, id),
    driver: need<Driver>(dir, "driver", MODEL_CONTROLS),
    cap: get<string[]>("cap") ?? [],
    fallback: get<string[]>("fallback") ?? [],
    session: get<Session>("session") ?? "none",
    effort: get<Effort>("effort") ?? "auto",
  };
}

/** Loads tool `name` from `<dir>/<name>.d/`; its `name` control must equal `name`. */
export function loadTool(dir: string, name: string): ToolDef {
  checkName(name, { kind: "tool" });
  const d = `${dir}/${name}.d`;
  if (!isDir(d)) throw new CtxError("ENOENT", `no tool ${quote(name)}`, { path: d });
  const req = <T>(c: string): T => need<T>(d, c, TOOL_CONTROLS);
  const own = req<string>("name");
  if (own !== name) {
    throw new CtxError("EINVAL", `"name": ${quote(own)} does not match the tool ${quote(name)}`, {
      path: `${d}/name`,
    });
  }
  return {
    name,
    dir: d,
    description: req<string>("description"),
    schema: req<JsonObject>("schema"),
    cap: req<string[]>("cap"),
    policy: req<PolicyRule[]>("policy"),
  };
}

/**
 * The effective context window in tokens for `agent` running on `model`: `auto` follows a known
 * limit (undefined = unknown); an explicit window the model cannot hold makes it ineligible (EINVAL).
 */
export function effectiveWindow(
  agent: Pick<AgentDef, "window">,
  model: Pick<ModelDef, "limit" | "ref">,
): number | undefined {
  return effectiveTokens(agent.window, model.limit, model.ref);
}
