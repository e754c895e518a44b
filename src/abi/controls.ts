/** The control tables: every file of `agent/<n>.d/`, `model/<p>/<m>.d/`, `tool/<n>.d/` and its rules. */
import { CtxError } from "./errno.ts";
import { quote } from "./text.ts";
import {
  formatGroups,
  formatId,
  formatLabel,
  parseGid,
  parseGroups,
  parseLabel,
  parseOwner,
  parseUid,
} from "./identity.ts";
import {
  formatEnv,
  formatPath,
  formatToolPath,
  parseCwd,
  parseEnv,
  parseRoot,
  parseToolPath,
} from "./view.ts";
import { formatMount, parseMount } from "./mount.ts";
import { formatRlimit, parseRlimit } from "./rlimit.ts";
import { formatLimit, formatWindow, parseLimit, parseWindow } from "./window.ts";
import {
  formatAbi,
  formatApproval,
  formatEffort,
  formatPerm,
  formatSession,
  parseAbi,
  parseApproval,
  parseEffort,
  parsePerm,
  parseSession,
} from "./choice.ts";
import {
  formatToolCap,
  formatToolName,
  formatTools,
  parseToolCap,
  parseToolName,
  parseTools,
} from "./tools.ts";
import { formatPolicy, parsePolicy } from "./policy.ts";
import {
  formatCap,
  formatDefaults,
  formatDriver,
  formatFallback,
  formatModelId,
  formatModelRef,
  parseCap,
  parseDefaults,
  parseDriver,
  parseFallback,
  parseModelId,
  parseModelRef,
} from "./model.ts";
import {
  formatJson,
  formatText,
  parseDescription,
  parseMeta,
  parseSchema,
  parseSystem,
  parseTemplate,
} from "./doc.ts";
import {
  formatLog,
  formatPid,
  formatStatus,
  parseLog,
  parsePid,
  parseStatus,
} from "./projection.ts";

/** How one control file is parsed, serialized and written. */
export interface ControlSpec<T = unknown> {
  /** Parses the whole file; throws CtxError EINVAL (EMSGSIZE over 64 KiB) naming the rule. */
  parse(text: string): T;
  /** The canonical bytes of a value. */
  format(value: T): string;
  /** False for projections (status, pid, log, limit): writes are EROFS. */
  writable: boolean;
  /** A one-value file: `ctx set` appends the final newline. */
  single: boolean;
  /** The object is incomplete without it (absent optional controls have documented defaults). */
  required: boolean;
}

/** The object kinds that have control directories. */
export type ControlKind = "agent" | "model" | "tool";

function spec<T>(
  parse: (text: string) => T,
  format: (value: T) => string,
  flags: { writable?: boolean; single?: boolean; required?: boolean },
): ControlSpec {
  return {
    parse,
    format: format as (value: unknown) => string,
    writable: flags.writable ?? true,
    single: flags.single ?? false,
    required: flags.required ?? false,
  };
}

const one = { single: true };
const projected = { writable: false };

/** `agent/<name>.d/*`. */
export const AGENT_CONTROLS: Readonly<Record<string, ControlSpec>> = {
  owner: spec(parseOwner, formatId, { ...one, required: true }),
  uid: spec(parseUid, formatId, one),
  gid: spec(parseGid, formatId, one),
  groups: spec(parseGroups, formatGroups, {}),
  label: spec(parseLabel, formatLabel, { ...one, required: true }),
  root: spec(parseRoot, formatPath, one),
  cwd: spec(parseCwd, formatPath, one),
  env: spec(parseEnv, formatEnv, {}),
  path: spec(parseToolPath, formatToolPath, {}),
  mount: spec(parseMount, formatMount, {}),
  model: spec(parseModelRef, formatModelRef, { ...one, required: true }),
  window: spec(parseWindow, formatWindow, one),
  perm: spec(parsePerm, formatPerm, { ...one, required: true }),
  abi: spec(parseAbi, formatAbi, { ...one, required: true }),
  approval: spec(parseApproval, formatApproval, one),
  rlimit: spec(parseRlimit, formatRlimit, {}),
  tools: spec(parseTools, formatTools, {}),
  policy: spec(parsePolicy, formatPolicy, {}),
  "system.md": spec(parseSystem, formatText, {}),
  "prompt.template.md": spec(parseTemplate, formatText, {}),
  "meta.json": spec(parseMeta, formatJson, {}),
  status: spec(parseStatus, formatStatus, { ...projected, single: true }),
  pid: spec(parsePid, formatPid, { ...projected, single: true }),
  log: spec(parseLog, formatLog, projected),
};

/** `model/<provider>/<model>.d/*`. */
export const MODEL_CONTROLS: Readonly<Record<string, ControlSpec>> = {
  driver: spec(parseDriver, formatDriver, { required: true }),
  id: spec(parseModelId, formatModelId, one),
  default: spec(parseDefaults, formatDefaults, {}),
  cap: spec(parseCap, formatCap, {}),
  limit: spec(parseLimit, formatLimit, { ...projected, single: true }),
  fallback: spec(parseFallback, formatFallback, {}),
  session: spec(parseSession, formatSession, one),
  effort: spec(parseEffort, formatEffort, one),
  status: spec(parseStatus, formatStatus, { ...projected, single: true }),
  log: spec(parseLog, formatLog, projected),
};

/** `tool/<name>.d/*`. */
export const TOOL_CONTROLS: Readonly<Record<string, ControlSpec>> = {
  name: spec(parseToolName, formatToolName, { ...one, required: true }),
  description: spec(parseDescription, formatText, { required: true }),
  schema: spec(parseSchema, formatJson, { required: true }),
  cap: spec(parseToolCap, formatToolCap, { required: true }),
  policy: spec(parsePolicy, formatPolicy, { required: true }),
  status: spec(parseStatus, formatStatus, { ...projected, single: true }),
  log: spec(parseLog, formatLog, projected),
};

/** The table of a kind. */
export const CONTROLS: Readonly<Record<ControlKind, Readonly<Record<string, ControlSpec>>>> = {
  agent: AGENT_CONTROLS,
  model: MODEL_CONTROLS,
  tool: TOOL_CONTROLS,
};

/**
 * Controls that can hold secrets (an executable agent's key goes in `env`; its stderr, which may
 * print anything, goes in `log`), by kind: readable only by the object's owner and root, in the
 * storage tree (0600, root's), through the mount (0600, shown as the owner's) and so in every
 * sandbox. The one list every layer asks.
 */
export const SECRET_CONTROLS: Readonly<Record<ControlKind, ReadonlySet<string>>> = {
  agent: new Set(["env", "log"]),
  model: new Set(),
  tool: new Set(),
};

/** Mode of a secret control file: owner read/write only. */
export const SECRET_MODE = 0o600;
/** Mode of every other control file. */
export const CONTROL_MODE = 0o644;

/** True when `kind`'s control `name` can hold a secret ({@link SECRET_CONTROLS}). */
export function isSecretControl(kind: ControlKind, name: string): boolean {
  return SECRET_CONTROLS[kind].has(name);
}

/** The mode a control file of `kind` named `name` is written with: 0600 for secrets, else 0644. */
export function controlMode(kind: ControlKind, name: string): number {
  return isSecretControl(kind, name) ? SECRET_MODE : CONTROL_MODE;
}

/** The spec of `kind`'s control `name`; an unknown name is EINVAL `not a control`. */
export function controlSpec(kind: ControlKind, name: string): ControlSpec {
  const table = CONTROLS[kind];
  if (!Object.hasOwn(table, name)) {
    throw new CtxError("EINVAL", `${quote(name)} is not a control (not in the ${kind} table)`);
  }
  return table[name];
}
