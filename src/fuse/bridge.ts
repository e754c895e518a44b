/** The one bridge from the mount to the storage tree's control rules (src/store/control.ts). */
import { controlMode, controlSpec, isSecretControl } from "../abi/controls.ts";
import { CtxError, ERRNO, ignore, toCtxError } from "../abi/errno.ts";
import { parseOwner } from "../abi/identity.ts";
import { isName } from "../abi/names.ts";
import { replaceFile } from "../store/atomic.ts";
import { checkControl, classify, type ControlRef, writeControl } from "../store/control.ts";
import { knownLimit } from "../store/agent.ts";
import { readRegular } from "../store/regular.ts";
import { formatLimit } from "../abi/window.ts";

export { checkControl, writeControl };
export { type HostConfig, useHostConfig } from "../store/providers.ts";

/** Which control `abiPath` names (agent, model, tool, or a user-tier object in home/<uid>/), or null. */
export function controlPath(abiPath: string): ControlRef | null {
  return classify(abiPath);
}

/** The control directory of a control path: `<base>/<object>.d`. */
function dirOf(ref: ControlRef): string {
  return `${ref.base}/${ref.object}.d`;
}

/**
 * Who is making agent `<name>` through the mount, by `<root>/agent/<name>`, from the MKDIR of its
 * `.d/` until its `owner` control takes over (or the `.d/` is removed). Memory, not the backing
 * tree: definitions are root's there whoever made them, so the backing owner says nothing. A
 * half-made agent without `owner` whose daemon restarted is root's to finish or remove.
 */
const creators = new Map<string, number>();

/** Notes that `uid` started agent `name` (MKDIR `agent/<name>.d`) in the tree at `root`. */
export function noteCreator(root: string, name: string, uid: number): void {
  creators.set(`${root}/agent/${name}`, uid);
}

/** Forgets the creator of agent `name` (its `.d/` is gone, or its entry is in place). */
export function forgetCreator(root: string, name: string): void {
  creators.delete(`${root}/agent/${name}`);
}

/**
 * The uid that owns the object of a control path: `agent/<n>.d/owner` for agents, `<u>` for
 * objects under `home/<u>/`, root for system models and tools (and for a broken owner file).
 */
export function objectOwner(root: string, abiPath: string): number {
  const ref = classify(abiPath);
  if (!ref) return 0;
  const m = ref.base.match(/^home\/([0-9]+)\//);
  if (m) return Number(m[1]);
  if (ref.kind !== "agent") return 0;
  try {
    return parseOwner(Deno.readTextFileSync(`${root}/${dirOf(ref)}/owner`));
  } catch (e) {
    // Before `owner` exists (an agent being created through the mount) the agent is its
    // creator's while it is being made; a broken owner file leaves the agent to root alone.
    if (!(e instanceof Deno.errors.NotFound) || !creating(root, ref.object)) return 0;
    return creators.get(`${root}/agent/${ref.object}`) ?? 0;
  }
}

/** True when `agent/<name>` (the entry written last by a creation) is absent: the agent is still being made. */
export function creating(root: string, name: string): boolean {
  try {
    Deno.lstatSync(`${root}/agent/${name}`);
    return false;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return true;
  }
}

/** Largest agent entry (program) installed through the mount: store/agent_new.ts `MAX_PROGRAM_BYTES`. */
export const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

/**
 * Installs `bytes` as the entry `agent/<name>` of the tree at `root`, atomically: a new file of the
 * daemon's (root's), 0755 when `exec` else 0644. 0 or -errno.
 */
export function installEntry(
  root: string,
  name: string,
  bytes: Uint8Array,
  options: { exec: boolean },
): number {
  try {
    replaceFile(`${root}/agent/${name}`, bytes, {
      mode: options.exec ? 0o755 : 0o644,
      uid: Deno.uid() ?? 0,
      gid: Deno.gid() ?? 0,
    });
    return 0;
  } catch (e) {
    return -ERRNO[toCtxError(e).errno];
  }
}

/**
 * The label `ctx agent new` gives (store/agent_new.ts `NEW_AGENT_LABEL`; a test keeps them equal).
 * Not imported: agent_new.ts pulls in the initial tree and with it src/tool, which fuse must not.
 */
export const NEW_AGENT_LABEL = "user_u:agent_r:agent_t:s0";

/** The values a creator who is not root must give the identity controls and projections. */
function creationRule(control: string, who: { uid: number; gid: number }): string | null {
  switch (control) {
    case "owner":
    case "uid":
      return `${who.uid}\n`;
    case "gid":
      return `${who.gid}\n`;
    case "groups":
    case "pid":
    case "log":
      return "";
    case "label":
      return `${NEW_AGENT_LABEL}\n`;
    case "status":
      return "dead\n";
  }
  return null;
}

/**
 * Commits a control written through the mount. An agent whose entry `agent/<n>` does not exist
 * yet is being created (`ctx agent new` writes every control, then renames the entry into
 * place): its first controls are written by its creator (see {@link noteCreator}). A creator that
 * is not root gets exactly the identity `ctx agent new` gives (owner, uid, gid = its own; no extra
 * groups; the default label) and the projections' initial values; everything else is validated
 * as always. Once the entry exists, every write goes through {@link writeControl} unchanged.
 */
export function commitControl(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: { uid: number; gid: number },
): void {
  judge(root, abiPath, bytes, options, true);
}

/**
 * Applies every rule {@link commitControl} applies and writes nothing: an open control handle
 * judges its content at WRITE and commits it only when it is closed.
 */
export function checkCommit(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: { uid: number; gid: number },
): void {
  judge(root, abiPath, bytes, options, false);
}

function judge(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: { uid: number; gid: number },
  write: boolean,
): void {
  const ref = classify(abiPath);
  if (
    !ref || ref.kind !== "agent" || ref.base !== "agent" || !isName(ref.object) ||
    !creating(root, ref.object)
  ) {
    const f = write ? writeControl : checkControl;
    return f(root, abiPath, bytes, { uid: options.uid, gid: options.gid });
  }
  const owner = objectOwner(root, abiPath);
  if (options.uid !== 0 && owner !== options.uid) {
    throw new CtxError(
      "EACCES",
      `uid ${options.uid} is not the creator (${owner}) of agent "${ref.object}"`,
      { path: abiPath },
    );
  }
  let spec;
  try {
    spec = controlSpec("agent", ref.control);
  } catch (e) {
    throw toCtxError(e, abiPath);
  }
  const text = new TextDecoder().decode(bytes);
  const rule = options.uid === 0 ? null : creationRule(ref.control, options);
  if (rule !== null && text !== rule) {
    throw new CtxError(
      "EACCES",
      `Cannot set "${ref.control}" of a new agent to ${JSON.stringify(text)}: uid ${options.uid} ` +
        `may only give it ${JSON.stringify(rule)}`,
      { path: abiPath },
    );
  }
  if (spec.writable) return (write ? writeControl : checkControl)(root, abiPath, bytes);
  // A projection (status, pid, log) gets its initial value once, while the agent is made.
  const path = `${root}/${abiPath}`;
  let exists = true;
  try {
    Deno.lstatSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    exists = false;
  }
  if (exists) {
    throw new CtxError("EROFS", `"${ref.control}" is read-only (projected by the runtime)`, {
      path: abiPath,
    });
  }
  try {
    spec.parse(text);
  } catch (e) {
    const err = toCtxError(e, abiPath);
    throw new CtxError(err.errno, `Cannot set "${ref.control}": ${err.message}`, { path: abiPath });
  }
  if (!write) return;
  // a definition file: the daemon's (root's), like every file under agent/ (a secret one 0600)
  replaceFile(path, bytes, {
    mode: controlMode(ref.kind, ref.control),
    uid: Deno.uid() ?? 0,
    gid: Deno.gid() ?? 0,
  });
}

/** Whether a control path may be written: "control", "readonly" (EROFS) or "unknown" (EINVAL). */
export function controlKind(abiPath: string): "control" | "readonly" | "unknown" {
  const ref = classify(abiPath);
  if (!ref) return "unknown";
  try {
    return controlSpec(ref.kind, ref.control).writable ? "control" : "readonly";
  } catch (e) {
    ignore(e, "EINVAL");
    return "unknown";
  }
}

/** True when `abiPath` is a secret control (`agent/<n>.d/env`): only its owner and root may read it. */
export function secretControl(abiPath: string): boolean {
  const ref = classify(abiPath);
  return ref !== null && isSecretControl(ref.kind, ref.control);
}

/** Largest model entry whose `context_length=` line the mount rewrites (larger ones are shown as stored). */
const MAX_ENTRY_TEXT = 65536;

/** The effective limit of model `object` (`<provider>/<model>`) as a line's value, or null when it has no `.d/`. */
function limitText(root: string, object: string): string | null {
  const dir = `${root}/model/${object}.d`;
  if (!Deno.lstatSync(dir).isDirectory) return null;
  const [provider, model] = object.split("/");
  return formatLimit(knownLimit(dir, provider, model));
}

/**
 * The text the mount shows for a file it computes rather than reads: `model/<p>/<m>.d/limit` of
 * an existing model object is its effective limit (host configuration, stored file, catalog,
 * `unknown`: src/store/agent.ts `knownLimit`), whether or not a `limit` file is stored; the model
 * entry `model/<p>/<m>` is its stored metadata with the `context_length=` line saying the same
 * limit. Null for every other path (and for a model that does not exist: read as it is).
 */
export function projectedText(root: string, abiPath: string): string | null {
  if (!abiPath.startsWith("model/")) return null;
  try {
    if (abiPath.endsWith(".d/limit")) {
      const ref = classify(abiPath);
      if (ref === null || ref.base !== "model" || ref.control !== "limit") return null;
      return limitText(root, ref.object);
    }
    const parts = abiPath.split("/");
    if (parts.length !== 3 || parts[2].endsWith(".d") || parts[2].startsWith(".")) return null;
    // One nofollow, nonblocking open checked on the fd (no lstat-then-open window).
    const bytes = readRegular(`${root}/${abiPath}`, { max: MAX_ENTRY_TEXT + 1 });
    if (bytes === undefined || bytes.length > MAX_ENTRY_TEXT) return null;
    const text = new TextDecoder().decode(bytes);
    if (!/^context_length=.*$/m.test(text)) return null;
    const limit = limitText(root, `${parts[1]}/${parts[2]}`);
    if (limit === null) return null;
    return text.replace(/^context_length=.*$/m, `context_length=${limit.trimEnd()}`);
  } catch (e) {
    ignore(e, Deno.errors.NotFound, "ENOENT", "EINVAL");
    return null; // not there (or a broken `id`/`limit` file): read as it is
  }
}
