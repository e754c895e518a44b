/**
 * The commands `ctx` runs without loading commander: `ctx`, `ctx status`, `ctx --version` and
 * `ctx agent send`, in the plain forms people and scripts type. Anything this parser is not sure
 * of (help, an unknown or combined flag, `--`, a value starting with `-`) is left to the full
 * parser, which words every usage error.
 */
import { VERSION } from "../abi/version.ts";
import { guarded } from "./fail.ts";
import { findTree, firstPlace, type FoundTree } from "./root.ts";
import type { SendArgs } from "./send.ts";

/** A command line {@link quick} understood. */
export type Quick =
  | { cmd: "version" }
  | { cmd: "status"; root?: string }
  | { cmd: "send"; root?: string; agent: string; words: string[]; options: SendArgs };

/** `send`'s options that take a value, by every spelling, and the key each sets. */
const VALUED: Record<string, "session" | "scope" | "cwd" | "id" | "approve"> = {
  "-s": "session",
  "--session": "session",
  "--scope": "scope",
  "--cwd": "cwd",
  "--id": "id",
  "--approve": "approve",
};
const FLAGS: Record<string, "json" | "verbose"> = {
  "--json": "json",
  "-v": "verbose",
  "--verbose": "verbose",
};

const dashed = (s: string) => s.length > 1 && s.startsWith("-");

/**
 * Splits `--root X`, `-r X` and `--root=X` out of `args` (the program's option, recognized
 * anywhere as commander does; the last one wins). Undefined when one is malformed.
 */
function takeRoot(args: readonly string[]): { root?: string; rest: string[] } | undefined {
  let root: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--root" || a === "-r") {
      const v = args[++i];
      if (v === undefined || v.startsWith("-")) return undefined;
      root = v;
    } else if (a.startsWith("--root=")) root = a.slice("--root=".length);
    else rest.push(a);
  }
  return { root, rest };
}

/** The `send` command line after `agent send`, or undefined when it is not a plain one. */
function sendLine(args: readonly string[]): Omit<Quick & { cmd: "send" }, "root"> | undefined {
  const options: SendArgs = { approve: [] };
  const operands: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "-" || a === "--") return undefined;
    if (!dashed(a)) {
      operands.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    const name = eq > 0 && a.startsWith("--") ? a.slice(0, eq) : a;
    if (name in FLAGS && name === a) {
      options[FLAGS[name]] = true;
      continue;
    }
    const key = VALUED[name];
    if (!key) return undefined;
    const v = name === a ? args[++i] : a.slice(eq + 1);
    if (v === undefined || v.startsWith("-")) return undefined;
    if (key === "approve") options.approve = [...options.approve, v];
    else options[key] = v;
  }
  const [agent, ...words] = operands;
  if (agent === undefined) return undefined;
  return { cmd: "send", agent, words, options };
}

/** The command `args` (Deno.args) asks for, when it is one {@link quick} runs; else undefined. */
export function quick(args: readonly string[]): Quick | undefined {
  if (args.length === 0) return { cmd: "status" }; // no command at all is `ctx status`
  if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) return { cmd: "version" };
  const split = takeRoot(args);
  if (!split) return undefined;
  const { root, rest } = split;
  if (rest.length === 1 && rest[0] === "status") return { cmd: "status", root };
  if (rest[0] === "agent" && rest[1] === "send") {
    const line = sendLine(rest.slice(2));
    return line && { ...line, root };
  }
  return undefined;
}

/**
 * Runs a {@link quick} command as the full parser's action would: same output, same errors,
 * same exit code. `checkout` is the checkout ctx runs from (its dev mount is looked for).
 */
export async function runQuick(
  q: Quick,
  options: { env: Record<string, string | undefined>; checkout?: string },
): Promise<void> {
  if (q.cmd === "version") return console.log(`ctx ${VERSION}`);
  let found: FoundTree | undefined;
  const tree = () =>
    found ??= findTree({ root: q.root, env: options.env, checkout: options.checkout });
  if (q.cmd === "status") {
    const { status } = await import("./status.ts");
    return guarded("status", () => console.log(status(tree()).join("\n")));
  }
  const { sendCommand } = await import("./send.ts");
  await sendCommand(
    { root: () => tree().root, guess: () => firstPlace({ root: q.root, env: options.env }) },
    q.agent,
    q.words,
    q.options,
  );
  // The answer is out (every write above is synchronous) and the connection closed: nothing is
  // left to wait for but the runtime's own teardown of ops still settling (about 1.5 ms).
  Deno.exit();
}
