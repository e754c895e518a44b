/** `agent/<n>.d/rlimit`: the resource limits of every sandboxed process tree, which a control may only lower. */
import { invalid, listLines, parseU32, quote } from "./text.ts";

/** The limits one sandbox runs under (each process; `nproc` counts the sandbox's own processes). */
export interface Rlimits {
  /** Processes (threads included) of the sandbox's user namespace: RLIMIT_NPROC. */
  nproc: number;
  /** Private writable memory per process in MiB: RLIMIT_DATA (heap, anonymous mappings). */
  data: number;
  /** CPU seconds per process: RLIMIT_CPU (SIGXCPU, then SIGKILL). */
  cpu: number;
  /** Open files per process: RLIMIT_NOFILE. */
  nofile: number;
}

/**
 * The defaults (spec/sandbox.md). `data` leaves Deno (tsh itself runs on it: it needs about 1 GiB
 * of reservations to start) room; `cpu` matches the default tool wall-clock bound.
 */
export const DEFAULT_RLIMITS: Readonly<Rlimits> = {
  nproc: 256,
  data: 2048,
  cpu: 120,
  nofile: 1024,
};

const NAMES = Object.keys(DEFAULT_RLIMITS) as (keyof Rlimits)[];

/** Parses `rlimit`: lines `<name> <value>`, each name once, each value at most the default. */
export function parseRlimit(text: string): Partial<Rlimits> {
  const out: Partial<Rlimits> = {};
  for (const { no, text: line } of listLines("rlimit", text, { comments: true })) {
    const m = /^([a-z]+) ([^ ]+)$/.exec(line);
    if (!m) throw invalid("rlimit", `line ${no} ${quote(line)} is not "<name> <value>"`);
    const name = m[1] as keyof Rlimits;
    if (!NAMES.includes(name)) {
      throw invalid("rlimit", `line ${no}: ${quote(m[1])} is not one of ${NAMES.join(", ")}`);
    }
    if (out[name] !== undefined) throw invalid("rlimit", `line ${no}: ${quote(name)} is repeated`);
    const max = DEFAULT_RLIMITS[name];
    const v = parseU32("rlimit", m[2]);
    if (v > max) {
      throw invalid(
        "rlimit",
        `line ${no}: ${name} ${v} is above the default ${max} (a control may only lower a limit)`,
      );
    }
    out[name] = v;
  }
  return out;
}

/** Serializes `rlimit` in the canonical order. */
export function formatRlimit(r: Partial<Rlimits>): string {
  return NAMES.filter((n) => r[n] !== undefined).map((n) => `${n} ${r[n]}\n`).join("");
}

/** The limits in force: the defaults, lowered by the control. */
export function effectiveRlimits(r: Partial<Rlimits> = {}): Rlimits {
  return { ...DEFAULT_RLIMITS, ...r };
}
