/** How `ctx agent send|chat` show a run to a person: answer text, one line per tool call, colour only on terminals. */
import type { ClientFrame } from "./client.ts";

/** Terminal styling: real escape codes only when the stream is a terminal and NO_COLOR is unset. */
export interface Style {
  /** Marks secondary lines (tool calls, notes). */
  dim(s: string): string;
}

const PLAIN: Style = { dim: (s) => s };
const ANSI: Style = { dim: (s) => `\x1b[2m${s}\x1b[22m` };

/**
 * The style for a stream: colour when it is a terminal and `NO_COLOR` is absent or empty
 * (no-color.org), never in a pipe or a file.
 */
export function styleFor(options: { terminal: boolean; env: Record<string, string | undefined> }) {
  const noColor = options.env.NO_COLOR !== undefined && options.env.NO_COLOR !== "";
  return options.terminal && !noColor ? ANSI : PLAIN;
}

/** Where a transcript goes. */
export interface Sink {
  /** Answer text, as it streams (possibly a partial line). */
  text(s: string): void;
  /** One whole secondary line (tool call, approval note, error); text before it is ended first. */
  line(s: string): void;
}

const MAX_CALL = 120;
const MAX_RESULT = 100;

// Control characters (C0, DEL, C1), format characters (bidi overrides and isolates, zero-width
// ones, soft hyphen), spaces other than U+0020, line and paragraph separators, private-use,
// unassigned and lone surrogates: anything a terminal would act on, hide, or show as a plain space.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zs}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\\]/gu;

/**
 * `s` with every character a terminal would act on or hide shown as an escape (`\n`, `\x1b`,
 * `\u{202e}`), and `\` as `\\`, so what is printed is exactly what runs, readable.
 */
export function visible(s: string): string {
  return s.replace(HIDDEN, (c) => {
    if (c === " ") return c;
    if (c === "\\") return "\\\\";
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    const n = c.codePointAt(0) ?? 0;
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, "0")}` : `\\u{${n.toString(16)}}`;
  });
}

/** One argument as typed: bare when plain, else single-quoted (so `a b` is not two arguments). */
function arg(s: string): string {
  const v = visible(s);
  return /^[\w./:=@%+,^-]+$/.test(v) ? v : `'${v.replaceAll("'", "\\'")}'`;
}

// Only for lines that ask nothing (finished calls): the approval prompt never clips.
function clip(s: string, n: number): string {
  const one = visible(s.replace(/\s*\n\s*/g, " ").trim());
  return one.length > n ? one.slice(0, n - 1) + "…" : one;
}

/** How a call reads: `tsh fs.stat /workspace`, or a direct call's name and JSON arguments. */
export function callText(name: string, args: unknown): string {
  const a = args as { args?: unknown; command?: unknown } | null;
  if (name === "tsh" && Array.isArray(a?.args)) return clip(["tsh", ...a.args].join(" "), MAX_CALL);
  if (name === "tsh" && typeof a?.command === "string") return clip(`tsh ${a.command}`, MAX_CALL);
  return clip(`${name} ${JSON.stringify(args ?? {})}`, MAX_CALL);
}

/** A tool result part as the tool message frame carries it. */
export interface ResultPart {
  content: string;
  status?: string;
  errno?: string;
  truncated?: boolean;
}

/**
 * The line for one finished call: `· tsh fs.stat /workspace → ok`, or
 * `· tsh fs.read /x → ENOENT: <first words of the result>`; with `verbose`, the whole result
 * follows, indented.
 */
export function resultLines(
  call: string,
  part: ResultPart,
  options: { verbose?: boolean } = {},
): string[] {
  const cut = part.truncated ? " (truncated)" : "";
  let head = `· ${call} → ok${cut}`;
  if (part.status === "error") {
    const errno = part.errno ?? "error";
    // Tools often start their message with the errno already: say it once.
    const why = clip(part.content.replace(new RegExp(`^${errno}:\\s*`), ""), MAX_RESULT);
    head = `· ${call} → ${errno}${why ? `: ${why}` : ""}${cut}`;
  }
  if (!options.verbose || part.content === "") return [head];
  // Escaped too: a result must not rewrite the lines above it (a tab stays a tab).
  const body = part.content.replace(/\n$/, "").split("\n").map((l) =>
    `  ${visible(l).replaceAll("\\t", "\t")}`
  );
  return [head, ...body];
}

/**
 * The prompt for an approval request: `· tsh fs.stat /workspace needs approval: allow once? [y/N] `.
 * The whole command, never clipped (the terminal wraps a long one), each argument escaped by
 * {@link visible} and quoted when it has spaces: the user consents to exactly what runs.
 */
export function approvalPrompt(f: ClientFrame): string {
  const args = Array.isArray(f.args) ? f.args.map(String) : [];
  const words = ["tsh", ...(args.length ? args : [String(f.name)])].map(arg);
  return `· ${words.join(" ")} needs approval: allow once? [y/N] `;
}

/** The note when an approval is denied without asking (no terminal to ask on). */
export function deniedNote(f: ClientFrame): string {
  const name = arg(String(f.name));
  return `· approval for ${name} denied (no terminal to ask on); rerun with --approve ${name}`;
}

/** True for an answer that allows: `y` or `yes`, any case. Anything else (Enter too) denies. */
export function allows(answer: string): boolean {
  return /^\s*y(es)?\s*$/i.test(answer);
}

/**
 * Turns a run's frames into what a person reads. The answer is the text streamed as deltas; a
 * step that streamed nothing has its assistant message printed instead (so the final message
 * shows whatever calls came before it). Each finished tool call is one line (full with verbose).
 */
export class Transcript {
  readonly #sink: Sink;
  readonly #verbose: boolean;
  readonly #style: Style;
  /** Deltas of the current step (since the last tool result). */
  #step = "";

  constructor(sink: Sink, options: { verbose?: boolean; style?: Style } = {}) {
    this.#sink = sink;
    this.#verbose = options.verbose ?? false;
    this.#style = options.style ?? PLAIN;
  }

  /** A secondary line through the sink, styled. */
  note(line: string): void {
    this.#sink.line(this.#style.dim(line));
  }

  /** Renders one frame (deltas, assistant and tool messages; the caller words errors). */
  frame(f: ClientFrame): void {
    switch (f.type) {
      case "delta": {
        const t = String(f.text ?? "");
        this.#step += t;
        if (t !== "") this.#sink.text(t);
        break;
      }
      case "message": {
        if (f.role === "tool") {
          const call = callText(String(f.name ?? "tsh"), f.arguments);
          for (const p of (f.content ?? []) as ResultPart[]) {
            for (const l of resultLines(call, p, { verbose: this.#verbose })) this.note(l);
          }
          this.#step = "";
        } else if (f.role === "assistant") {
          const text = ((f.content ?? []) as { text?: string }[]).map((p) => p.text ?? "").join("");
          if (this.#step === "" && text !== "") this.#sink.text(text);
          this.#step = "";
        }
        break;
      }
    }
  }
}
