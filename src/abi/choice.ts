/** One-word controls with a closed vocabulary: `perm`, `abi`, `approval`, `session`, `effort`. */
import { invalid, quote, singleLine } from "./text.ts";

/** The coarse capability ceiling: r = read/list/stat, w = write/replace, x = shell-like tools. */
export interface Perm {
  r: boolean;
  w: boolean;
  x: boolean;
}

/** Parses `perm`: one of the eight positional triplets `---` .. `rwx`. */
export function parsePerm(text: string): Perm {
  const v = singleLine("perm", text);
  if (!/^[r-][w-][x-]$/.test(v)) {
    throw invalid("perm", `${quote(v)} is not a triplet of r/-, w/-, x/- (e.g. "rwx", "r--")`);
  }
  return { r: v[0] === "r", w: v[1] === "w", x: v[2] === "x" };
}

/** Serializes `perm`. */
export function formatPerm(p: Perm): string {
  return `${p.r ? "r" : "-"}${p.w ? "w" : "-"}${p.x ? "x" : "-"}\n`;
}

/** A parser and serializer for a one-word control with a fixed vocabulary. */
function oneOf<const T extends string>(control: string, words: readonly T[]) {
  return {
    parse(text: string): T {
      const v = singleLine(control, text);
      if (!(words as readonly string[]).includes(v)) {
        throw invalid(control, `${quote(v)} is not one of ${words.join(", ")}`);
      }
      return v as T;
    },
    format(v: T): string {
      return `${v}\n`;
    },
  };
}

/** The only executable-agent ABI. */
export const ABIS = ["sdk-envelope-v1"] as const;
/** `abi` value. */
export type Abi = typeof ABIS[number];
const abi = oneOf("abi", ABIS);
/** Parses `abi`: only `sdk-envelope-v1` (required, never inferred). */
export const parseAbi: (text: string) => Abi = abi.parse;
/** Serializes `abi`. */
export const formatAbi: (v: Abi) => string = abi.format;

/** Approval modes. */
export const APPROVALS = ["auto", "ask"] as const;
/** `approval` value. */
export type Approval = typeof APPROVALS[number];
const approval = oneOf("approval", APPROVALS);
/** Parses `approval`: `auto` (the default when absent) or `ask`. */
export const parseApproval: (text: string) => Approval = approval.parse;
/** Serializes `approval`. */
export const formatApproval: (v: Approval) => string = approval.format;

/** Model session modes. */
export const SESSIONS = ["none", "socket"] as const;
/** Model `session` value. */
export type Session = typeof SESSIONS[number];
const session = oneOf("session", SESSIONS);
/** Parses model `session`: `none` (no `.sock`) or `socket`. */
export const parseSession: (text: string) => Session = session.parse;
/** Serializes model `session`. */
export const formatSession: (v: Session) => string = session.format;

/** Model reasoning effort words. */
export const EFFORTS = ["auto", "low", "medium", "high", "xhigh"] as const;
/** Model `effort` value. */
export type Effort = typeof EFFORTS[number];
const effort = oneOf("effort", EFFORTS);
/** Parses model `effort`. */
export const parseEffort: (text: string) => Effort = effort.parse;
/** Serializes model `effort`. */
export const formatEffort: (v: Effort) => string = effort.format;
