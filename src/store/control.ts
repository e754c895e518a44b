/** Validated control writes: path classification, per-file format, authority and cross-file invariants. */
import {
  AGENT_CONTROLS,
  checkName,
  checkWindow,
  type ControlKind,
  controlMode,
  controlSpec,
  CtxError,
  isSecretControl,
  type Limit,
  MAX_CONTROL_BYTES,
  quote,
  toCtxError,
  type Window,
} from "../abi/mod.ts";
import { tempTarget } from "../abi/names.ts";
import { asUser, type FsId } from "../sys/fsid.ts";
import { replaceFile } from "./atomic.ts";
import { knownLimit, readControl, resolveModel } from "./agent.ts";
import { ignore } from "../abi/errno.ts";

/** Which control an ABI path names. */
export interface ControlRef {
  kind: ControlKind;
  /** Agent or tool name, or `<provider>/<model>`. */
  object: string;
  /** Control file name, e.g. `window`. */
  control: string;
  /** The class directory below the tree root: `agent`, `model`, `tool`, `home/<uid>/tool`, `home/<uid>/model`. */
  base: string;
}

/** Options for {@link checkControl} and {@link writeControl}. */
export interface ControlOptions {
  /** The writer's uid; when given, authority is checked (uid 0, or the owner). */
  uid?: number;
  /** The writer's gid: a user-tier control the writer owns is written with it. */
  gid?: number;
}

/**
 * Which control `abiPath` (relative to the tree root, no leading slash) names, e.g.
 * `agent/coder.d/window`, `model/debug/echo.d/cap`, `tool/fs.read.d/schema`; null when the path is
 * not a file directly inside an object's `.d/` directory. The names are not checked here.
 */
export function classify(abiPath: string): ControlRef | null {
  const parts = abiPath.split("/");
  if (parts.some((p) => p === "")) return null;
  let base: string, kind: ControlKind, rest: string[];
  if (
    parts[0] === "home" && parts.length > 3 && /^(0|[1-9][0-9]*)$/.test(parts[1]) &&
    (parts[2] === "tool" || parts[2] === "model")
  ) {
    base = parts.slice(0, 3).join("/");
    kind = parts[2] as ControlKind;
    rest = parts.slice(3);
  } else if (parts[0] === "agent" || parts[0] === "model" || parts[0] === "tool") {
    base = parts[0];
    kind = parts[0];
    rest = parts.slice(1);
  } else return null;
  const n = kind === "model" ? 3 : 2;
  if (rest.length !== n) return null;
  const last = rest[n - 2];
  if (!last.endsWith(".d") || last.length <= 2) return null;
  const object = [...rest.slice(0, n - 2), last.slice(0, -2)].join("/");
  return { kind, object, control: rest[n - 1], base };
}

/**
 * The control a temp file beside it will replace: `.window.tmp-123-9f3a` (atomic.ts) or
 * `.window.tmp-123-9f3a-1` (with an attempt number) name `window`; anything else is null.
 */
export function tempControl(name: string): string | null {
  return tempTarget(name);
}

/** Identity and subject controls: a non-root owner may not widen who the agent runs as. */
const ROOT_ONLY = new Set(["gid", "groups", "label"]);

const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Rewords any failure as `Cannot set "<control>": <rule that failed>`, with the ABI path. */
function fail(e: unknown, abiPath: string, control: string): CtxError {
  const err = toCtxError(e, abiPath);
  const head = `"${control}": `;
  const why = err.message.startsWith(head) ? err.message.slice(head.length) : err.message;
  return new CtxError(err.errno, `Cannot set ${head}${why}`, { path: abiPath, cause: e });
}

/** Who may write: uid 0 always; agents: the owner; `home/<u>/` objects: u; system models/tools: only 0. */
function authorize(ref: ControlRef, dir: string, uid: number): void {
  if (uid === 0) return;
  const what = `${ref.kind} ${quote(ref.object)}`;
  if (ref.kind !== "agent") {
    const m = ref.base.match(/^home\/([0-9]+)\//);
    if (m && Number(m[1]) === uid) return;
    throw new CtxError(
      "EACCES",
      `uid ${uid} may not change ${what} (owned by ${m ? m[1] : "root"})`,
    );
  }
  let owner: number | undefined;
  try {
    owner = readControl<number>(dir, "owner", AGENT_CONTROLS.owner);
  } catch (e) {
    ignore(e, "EINVAL", "EMSGSIZE", "EACCES");
    owner = undefined; // an unreadable owner grants nothing
  }
  if (owner === undefined) {
    throw new CtxError("EACCES", `${what} has no valid owner; only uid 0 may change it`);
  }
  if (owner !== uid) {
    throw new CtxError("EACCES", `uid ${uid} is not the owner (${owner}) of ${what}`);
  }
  if (ROOT_ONLY.has(ref.control)) {
    throw new CtxError("EACCES", `only uid 0 may set "${ref.control}" of ${what}`);
  }
}

/** A non-root owner may set `owner` and `uid` only to itself: it cannot give away or borrow identity. */
function authorizeValue(ref: ControlRef, value: unknown, uid: number): void {
  if (uid === 0 || ref.kind !== "agent") return;
  if ((ref.control === "owner" || ref.control === "uid") && value !== uid) {
    throw new CtxError(
      "EACCES",
      `uid ${uid} may set "${ref.control}" only to itself, not ${value}`,
    );
  }
}

/** The known limit of model `ref` as seen from the tree (ENOENT when the model does not exist). */
function limitOf(root: string, ref: string): { real: string; limit: Limit } {
  const real = resolveModel(root, ref);
  const [provider, model] = real.split("/");
  return { real, limit: knownLimit(`${root}/model/${real}.d`, provider, model) };
}

/** Invariants that involve more than the written file. */
function crossCheck(root: string, ref: ControlRef, dir: string, value: unknown): void {
  const label = `"${ref.control}"`;
  if (ref.kind === "agent" && ref.control === "window" && value !== "auto") {
    const model = readControl<string>(dir, "model", AGENT_CONTROLS.model);
    if (model === undefined) {
      throw new CtxError(
        "EINVAL",
        `${label}: window ${value} needs a model, and the agent has none`,
      );
    }
    const { real, limit } = limitOf(root, model);
    try {
      checkWindow(value as number, limit, real);
    } catch (e) {
      throw new CtxError("EINVAL", `${label}: ${(e as Error).message}`);
    }
  }
  if (ref.kind === "agent" && ref.control === "model") {
    const { real, limit } = limitOf(root, value as string);
    let window: Window;
    try {
      window = readControl<Window>(dir, "window", AGENT_CONTROLS.window) ?? "auto";
    } catch (e) {
      throw new CtxError(
        "EINVAL",
        `${label}: the current window is invalid (${(e as Error).message}); set it first`,
      );
    }
    try {
      checkWindow(window, limit, real);
    } catch (e) {
      throw new CtxError(
        "EINVAL",
        `${label}: ${(e as Error).message}; the explicit window is kept, so set "window" first`,
      );
    }
  }
  if (ref.kind === "tool" && ref.control === "name" && value !== ref.object) {
    throw new CtxError(
      "EINVAL",
      `${label}: ${quote(value as string)} is not the tool's name ${quote(ref.object)}`,
    );
  }
  if (
    ref.kind === "model" && ref.control === "fallback" && (value as string[]).includes(ref.object)
  ) {
    throw new CtxError("EINVAL", `${label}: ${quote(ref.object)} cannot fall back to itself`);
  }
}

/**
 * Validates writing `bytes` to the control `abiPath` of the tree at `root`, throwing the first
 * failed rule: not a control EINVAL, read-only EROFS, missing object ENOENT, not allowed EACCES,
 * over 64 KiB EMSGSIZE, not UTF-8 or bad format EINVAL, broken cross-file invariant EINVAL.
 */
export function checkControl(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: ControlOptions = {},
): void {
  check(root, abiPath, bytes, options);
}

function check(root: string, abiPath: string, bytes: Uint8Array, options: ControlOptions) {
  const ref = classify(abiPath);
  if (!ref) {
    throw new CtxError("EINVAL", `Cannot set ${quote(abiPath)}: not a control file`, {
      path: abiPath,
    });
  }
  let dir: string;
  try {
    const spec = controlSpec(ref.kind, ref.control);
    checkName(ref.object, { kind: ref.kind === "model" ? "model" : ref.kind });
    if (ref.kind === "model" && !ref.object.includes("/")) {
      throw new CtxError("EINVAL", `${quote(ref.object)} is not <provider>/<model>`);
    }
    if (!spec.writable) {
      throw new CtxError("EROFS", `"${ref.control}" is read-only (projected by the runtime)`);
    }
    dir = `${root}/${ref.base}/${ref.object}.d`;
    let isDir = false;
    try {
      isDir = Deno.lstatSync(dir).isDirectory;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory)) throw e;
    }
    if (!isDir) throw new CtxError("ENOENT", `no ${ref.kind} ${quote(ref.object)}`);
    try {
      const st = Deno.lstatSync(`${dir}/${ref.control}`);
      if (st.isDirectory) throw new CtxError("EISDIR", `"${ref.control}" is a directory`);
      if (!st.isFile) throw new CtxError("EINVAL", `"${ref.control}" is not a regular file`);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    if (options.uid !== undefined) authorize(ref, dir, options.uid);
    if (bytes.length > MAX_CONTROL_BYTES) {
      throw new CtxError(
        "EMSGSIZE",
        `"${ref.control}": ${bytes.length} bytes is over the ${MAX_CONTROL_BYTES} byte limit`,
      );
    }
    let text: string;
    try {
      text = dec.decode(bytes);
    } catch {
      throw new CtxError("EINVAL", `"${ref.control}": the bytes are not UTF-8`);
    }
    const value = spec.parse(text);
    if (options.uid !== undefined) authorizeValue(ref, value, options.uid);
    crossCheck(root, ref, dir, value);
  } catch (e) {
    throw fail(e, abiPath, ref.control);
  }
  return { ref, dir };
}

/** Serializes writers of one control directory (window/model are checked against each other). */
function lockDir(dir: string): Deno.FsFile | undefined {
  const f = Deno.openSync(dir, { read: true });
  try {
    f.lockSync(true);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotSupported)) {
      f.close();
      throw toCtxError(e, dir);
    }
  }
  return f;
}

/**
 * The identity a write to `ref` runs as: user-tier objects (`home/<u>/{tool,model}/`) are u's and
 * live in u's home, so root acts there only as u (a symlink u planted reaches nothing u could not
 * reach, and new files are u's); null for the system tier (root's definitions, written as root).
 */
function tierUser(root: string, ref: ControlRef, options: ControlOptions): FsId | null {
  const m = ref.base.match(/^home\/([0-9]+)\//);
  if (!m) return null;
  const uid = Number(m[1]);
  if (options.uid === uid && options.gid !== undefined) return { uid, gid: options.gid };
  let gid = uid;
  try {
    const st = Deno.lstatSync(`${root}/home/${uid}`);
    if (st.isDirectory && st.uid === uid && st.gid !== null) gid = st.gid;
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* no home: the uid's own number */
  }
  return { uid, gid };
}

/**
 * Validates (see {@link checkControl}) and atomically replaces the control: a rejected write leaves
 * the file byte-for-byte unchanged. A system-tier control (agent/, model/, tool/) is the tree's:
 * written as the caller (root), mode 0644 (0600 for a secret control such as `env`), whoever
 * asked. A user-tier control keeps its mode (a secret one is 0600) and is written as its user
 * (see {@link tierUser}), never by root's authority.
 */
export function writeControl(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: ControlOptions = {},
): void {
  const ref = classify(abiPath);
  const user = ref ? tierUser(root, ref, options) : null;
  if (user === null) return write(root, abiPath, bytes, options, null);
  asUser(user, () => write(root, abiPath, bytes, options, user));
}

function write(
  root: string,
  abiPath: string,
  bytes: Uint8Array,
  options: ControlOptions,
  user: FsId | null,
): void {
  const ref = classify(abiPath);
  const dir = ref ? `${root}/${ref.base}/${ref.object}.d` : undefined;
  let lock: Deno.FsFile | undefined;
  try {
    if (dir) {
      try {
        lock = lockDir(dir);
      } catch (e) {
        ignore(e, Deno.errors.NotFound);
        lock = undefined; // a missing dir is reported by check() below with the ABI path
      }
    }
    const { ref: r, dir: d } = check(root, abiPath, bytes, options);
    const path = `${d}/${r.control}`;
    // No chown ever: the file is created by whoever writes (root, or the user for its own tier).
    const self = user ?? { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0 };
    // The mode is decided here, never inherited from the temp: a secret control stays 0600
    // across every replace (the atomic replace would otherwise make it 0644 again).
    let mode = controlMode(r.kind, r.control);
    if (user !== null && !isSecretControl(r.kind, r.control)) {
      try {
        mode = (Deno.lstatSync(path).mode ?? mode) & 0o777;
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* a new control: 0644 */
      }
    }
    try {
      replaceFile(path, bytes, { mode, uid: self.uid, gid: self.gid });
    } catch (e) {
      throw toCtxError(e, abiPath);
    }
  } finally {
    lock?.close();
  }
}
