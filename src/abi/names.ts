/** Object names: the one-component grammar of agents, tools and model parts, and model references. */
import { CtxError } from "./errno.ts";
import { quote } from "./text.ts";

/** What a name is checked as; `model` accepts a `<provider>/<model>` reference or an alias name. */
export type NameKind = "agent" | "tool" | "model" | "component";

/** Options for {@link checkName}. */
export interface NameOptions {
  /** Default `component`: one path component. */
  kind?: NameKind;
}

/** The one-component grammar, as a pattern (frames and envelopes check names with it too). */
export const NAME_GRAMMAR = /^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}$/;
/** The grammar as messages quote it. */
export const NAME_TEXT = "[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}";

/** Why `s` is not a valid single component, or undefined when it is. */
function componentFault(s: string): string | undefined {
  if (s === "") return "is empty";
  if (s === "." || s === "..") return 'is reserved ("." and ".." are not names)';
  if (s.includes("/")) return 'contains "/"';
  if (s.length > 64) return `is ${s.length} characters long (at most 64)`;
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(s)) return "contains a control character";
  if (/\s/.test(s)) return "contains whitespace";
  if (!/^[a-zA-Z0-9]/.test(s)) return `must start with a letter or digit, not ${quote(s[0])}`;
  const bad = s.match(/[^a-zA-Z0-9._+-]/);
  if (bad) return `contains ${quote(bad[0])} (allowed: letters, digits, . _ + -)`;
  if (s.endsWith(".sock")) return 'ends with ".sock" (reserved for sockets)';
  if (s.endsWith(".d")) return 'ends with ".d" (reserved for control directories)';
  if (!NAME_GRAMMAR.test(s)) return `does not match ${NAME_TEXT}`;
  return undefined;
}

/** Why `s` is not a valid name of `kind`, or undefined when it is. */
export function nameFault(s: string, kind: NameKind = "component"): string | undefined {
  if (kind !== "model") return componentFault(s);
  if (s.startsWith("/")) return 'starts with "/" (a reference is <provider>/<model>, not a path)';
  const parts = s.split("/");
  if (parts.length > 2) return "has more than two components (<provider>/<model> or an alias)";
  if (parts.length === 1) return componentFault(s);
  const [p, m] = parts;
  const pf = componentFault(p);
  if (pf) return `provider ${quote(p)} ${pf}`;
  const mf = componentFault(m);
  if (mf) return `model ${quote(m)} ${mf}`;
  return undefined;
}

/** True when `s` is a valid name (of `kind`, default one component). */
export function isName(s: string, options: NameOptions = {}): boolean {
  return nameFault(s, options.kind) === undefined;
}

/** Throws CtxError EINVAL saying which name rule `s` breaks; returns `s` when valid. */
export function checkName(s: string, options: NameOptions = {}): string {
  const kind = options.kind ?? "component";
  const fault = nameFault(s, kind);
  if (fault) {
    const what = kind === "component" ? "name" : `${kind} name`;
    throw new CtxError("EINVAL", `${what} ${quote(s)} ${fault}`);
  }
  return s;
}

/** True when a model reference is `<provider>/<model>` (not an alias). */
export function isModelPath(ref: string): boolean {
  return ref.includes("/") && isName(ref, { kind: "model" });
}

/**
 * The name a writer gives the temp it renames onto `base` (`.window.tmp-123-9f3a`): hidden, the
 * writer's pid, a random nonce, so writers and readers never collide. Every temp the store,
 * the runtime and the build make is named this way.
 */
export function tempName(base: string): string {
  const nonce = crypto.getRandomValues(new Uint32Array(1))[0].toString(16);
  return `.${base}.tmp-${Deno.pid}-${nonce}`;
}

/** Any name {@link tempName} makes (or an older writer's `.<base>.tmp-…`): never an object. */
export const TEMP_NAME = /^\..+\.tmp-/;

/**
 * The name a temp will replace: `.window.tmp-123-9f3a` (or with an attempt number,
 * `.window.tmp-123-9f3a-1`) names `window`; anything else is null.
 */
export function tempTarget(name: string): string | null {
  const m = name.match(/^\.(.+)\.tmp-[0-9]+-[0-9a-f]+(?:-[0-9]+)?$/);
  return m ? m[1] : null;
}
