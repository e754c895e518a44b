/** Policy v0: `allow <subject_type> <class>:<object> <permission>` lines, default deny. */
import { SUBJECT } from "./identity.ts";
import { nameFault } from "./names.ts";
import { checkAbsolute, invalid, joinLines, listLines, quote } from "./text.ts";
import { ignore } from "./errno.ts";

/** The fixed classes and their permissions (spec-digest 6.5). */
export const POLICY_CLASSES = {
  tool: ["execute"],
  model: ["use"],
  shared: ["read", "write"],
  session: ["read", "write", "resume"],
  mount: ["read", "write"],
  agent: ["create", "start", "stop", "read", "write"],
  network: ["connect"],
} as const;

/** A policy class. */
export type PolicyClass = keyof typeof POLICY_CLASSES;

/** One `allow` rule. */
export interface PolicyRule {
  subject: string;
  class: PolicyClass;
  object: string;
  permission: string;
}

/** Why `object` is not a valid object of `cls`, or undefined. No globs: objects are exact names. */
function objectFault(cls: PolicyClass, object: string): string | undefined {
  switch (cls) {
    case "tool":
    case "agent":
    case "shared":
    case "session":
      return nameFault(object, cls === "tool" || cls === "agent" ? cls : "component");
    case "model":
      return nameFault(object, "model");
    case "mount":
      if (object.startsWith("/")) {
        try {
          checkAbsolute("policy", object);
          return undefined;
        } catch (e) {
          ignore(e, "EINVAL");
          return "is not a canonical absolute path";
        }
      }
      return nameFault(object);
    case "network":
      return object === "default" ? undefined : 'is not "default" (the only network object)';
  }
}

/**
 * Parses policy v0. Each rule is exactly four single-space-separated fields; blank lines and lines
 * starting with `#` are skipped. Unknown verbs, classes and permissions are EINVAL.
 */
export function parsePolicy(text: string): PolicyRule[] {
  return listLines("policy", text, { comments: true }).map(({ no, text: line }) => {
    const at = `line ${no}`;
    const f = line.split(" ");
    if (f.length !== 4 || f.some((x) => x === "")) {
      throw invalid(
        "policy",
        `${at} ${quote(line)} is not "allow <subject_type> <class>:<object> <permission>"`,
      );
    }
    const [verb, subject, target, permission] = f;
    if (verb !== "allow") {
      throw invalid("policy", `${at}: verb ${quote(verb)} is not "allow" (policy v0 has no deny)`);
    }
    if (!SUBJECT.test(subject)) {
      throw invalid("policy", `${at}: subject ${quote(subject)} is not a type ending in "_t"`);
    }
    const colon = target.indexOf(":");
    if (colon < 0) throw invalid("policy", `${at}: ${quote(target)} is not <class>:<object>`);
    const cls = target.slice(0, colon);
    const object = target.slice(colon + 1);
    if (!Object.hasOwn(POLICY_CLASSES, cls)) {
      throw invalid(
        "policy",
        `${at}: class ${quote(cls)} is unknown (${Object.keys(POLICY_CLASSES).join(", ")})`,
      );
    }
    const c = cls as PolicyClass;
    const fault = objectFault(c, object);
    if (fault) throw invalid("policy", `${at}: ${cls} object ${quote(object)} ${fault}`);
    const perms: readonly string[] = POLICY_CLASSES[c];
    if (!perms.includes(permission)) {
      throw invalid(
        "policy",
        `${at}: permission ${quote(permission)} is not a ${cls} permission (${perms.join(", ")})`,
      );
    }
    return { subject, class: c, object, permission };
  });
}

/** Serializes rules canonically (comments and blank lines are not kept). */
export function formatPolicy(rules: readonly PolicyRule[]): string {
  return joinLines(rules.map((r) => `allow ${r.subject} ${r.class}:${r.object} ${r.permission}`));
}
