/** Policy v0 evaluation: default deny, exact matches only (no globs, deny rules or inheritance). */
import type { PolicyClass, PolicyRule } from "../abi/policy.ts";

/** One question put to a policy. */
export interface Ask {
  subject: string;
  cls: PolicyClass;
  object: string;
  permission: string;
}

/** True only when some rule allows exactly this subject, class, object and permission. */
export function allows(rules: readonly PolicyRule[], ask: Ask): boolean {
  return rules.some((r) =>
    r.subject === ask.subject && r.class === ask.cls && r.object === ask.object &&
    r.permission === ask.permission
  );
}

/** The rule text an allow needs, for error messages. */
export function ruleText(ask: Ask): string {
  return `allow ${ask.subject} ${ask.cls}:${ask.object} ${ask.permission}`;
}
