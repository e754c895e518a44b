/** Identity controls: `owner`, `uid`, `gid` (one id), `groups` (one id per line), `label`. */
import { invalid, joinLines, listLines, noDuplicate, parseU32, quote, singleLine } from "./text.ts";

/** Largest Linux id accepted: 4294967295 is (uid_t)-1, "no id", and never names a user. */
export const ID_MAX = 4294967294;

/** Parses a canonical id line (`0\n` .. `4294967294\n`) for `control` (owner, uid, gid). */
export function parseId(text: string, control = "uid"): number {
  return parseU32(control, singleLine(control, text), { zero: true, max: ID_MAX });
}

/** Serializes an id as its canonical line. */
export function formatId(id: number): string {
  return `${id}\n`;
}

/** Parses `owner`: the owning Linux uid. */
export function parseOwner(text: string): number {
  return parseId(text, "owner");
}

/** Parses `uid`: the runtime uid. */
export function parseUid(text: string): number {
  return parseId(text, "uid");
}

/** Parses `gid`: the runtime gid. */
export function parseGid(text: string): number {
  return parseId(text, "gid");
}

/** Parses `groups`: supplementary gids, one canonical id per line, no repeats; empty file = none. */
export function parseGroups(text: string): number[] {
  const seen = new Set<string>();
  return listLines("groups", text).map(({ no, text: line }) => {
    const id = parseU32("groups", line, { zero: true, max: ID_MAX });
    noDuplicate("groups", seen, line, no);
    return id;
  });
}

/** Serializes `groups`. */
export function formatGroups(groups: readonly number[]): string {
  return joinLines(groups.map(String));
}

/** An SELinux-like context; `type` is the policy subject. */
export interface Label {
  user: string;
  role: string;
  type: string;
  level: string;
}

const IDENT = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** The grammar of a policy subject type (the label's type field): an identifier ending in `_t`. */
export const SUBJECT = /^[A-Za-z][A-Za-z0-9_]{0,61}_t$/;

/** Parses `label`: `user:role:type:level`, e.g. `user_u:agent_r:coder_t:s0`. */
export function parseLabel(text: string): Label {
  const line = singleLine("label", text);
  const parts = line.split(":");
  if (parts.length !== 4) {
    throw invalid("label", `${quote(line)} has ${parts.length} fields (user:role:type:level)`);
  }
  const [user, role, type, level] = parts;
  for (const [field, v] of [["user", user], ["role", role]] as const) {
    if (!IDENT.test(v)) {
      throw invalid("label", `${field} ${quote(v)} is not an identifier ([A-Za-z][A-Za-z0-9_]*)`);
    }
  }
  if (!SUBJECT.test(type)) {
    throw invalid("label", `type ${quote(type)} is not an identifier ending in "_t"`);
  }
  if (!/^s(0|[1-9][0-9]{0,5})$/.test(level)) {
    throw invalid("label", `level ${quote(level)} is not a sensitivity such as "s0"`);
  }
  return { user, role, type, level };
}

/** Serializes a label. */
export function formatLabel(label: Label): string {
  return `${label.user}:${label.role}:${label.type}:${label.level}\n`;
}
