/** tsh's program: flags, the view from the allowlisted environment, one-shot, --json frames and the REPL. */
import { VERSION } from "../abi/version.ts";
import { TSH_ENV } from "../sandbox/env.ts";
import { operate, type ShellContext, words } from "./shell.ts";
import { ctxPathFor, mapView, normalizeView } from "./resolve.ts";
import type { ToolResult } from "./result.ts";
import { toolCache } from "./config.ts";
import { denoTty, LineEditor } from "./line.ts";
import { ignore } from "../abi/errno.ts";

const USAGE =
  `usage: tsh [--json] [--root PATH] [--limit BYTES] [--cache N] [--timeout SECONDS] [--nproc N] [--args-stdin] [--history FILE] [TOOL|BUILTIN [ARGS...]]
With no operation tsh reads commands from a line-editing prompt (its lines kept in --history FILE).
Tools resolve through CTX_PATH only.
--limit bounds a tool's output (default 16384 bytes); --timeout bounds its wall-clock time
(default 120 s), after which its whole process group is ended and the result is ETIMEDOUT.
--nproc runs every tool under that RLIMIT_NPROC (prlimit), below tsh's own.
--args-stdin appends the words of one JSON array of strings read from stdin.
`;

/** The only variables tsh reads (its Deno permission set allows nothing else). */
function readEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {};
  for (const k of TSH_ENV) env[k] = Deno.env.get(k);
  return env;
}

/**
 * Builds tsh's context from its environment and flags. A standalone session reads exactly
 * `$CTX_HOME/.tshrc` (CTX_HOME normalized; `/ctx/home/<uid>` when unset); `warn` (default:
 * stderr) hears about a .tshrc that is refused and ignored.
 */
export function context(
  env: Record<string, string | undefined>,
  options: {
    root?: string;
    limit?: number;
    cache?: number;
    timeout?: number;
    nproc?: number;
    warn?: (message: string) => void;
  } = {},
): ShellContext {
  const root = options.root ?? env.CTX_ROOT ?? "/ctx";
  const home = env.CTX_HOME ? normalizeView(env.CTX_HOME) : null;
  // The uid names the default CTX_PATH's user tier; CTX_HOME says whose home this session is.
  const m = home ? /^\/ctx\/home\/(\d+)$/.exec(home) : null;
  const uid = m ? Number(m[1]) : Deno.uid() ?? 0;
  const warn = options.warn ??
    ((msg: string) => Deno.stderr.writeSync(new TextEncoder().encode(`tsh: ${msg}\n`)));
  let tshrc: string | null = null;
  if (!env.CTX_AGENT) {
    const rc = mapView(root, `${home ?? `/ctx/home/${uid}`}/.tshrc`);
    try {
      if (rc) tshrc = Deno.readTextFileSync(rc);
    } catch (e) {
      ignore(
        e,
        Deno.errors.NotFound,
        Deno.errors.NotADirectory,
        Deno.errors.PermissionDenied,
      ); /* no .tshrc */
    }
  }
  return {
    root,
    agent: env.CTX_AGENT || undefined,
    uid,
    ctxPath: ctxPathFor(env, { tshrc, uid, warn }),
    home: env.HOME,
    env,
    limit: options.limit ?? 16384,
    cache: options.cache,
    timeout: options.timeout,
    nproc: options.nproc,
  };
}

function print(r: ToolResult): void {
  const out = r.status === "ok" || r.errno === undefined ? Deno.stdout : Deno.stderr;
  out.writeSync(new TextEncoder().encode(r.content));
  if (r.truncated) Deno.stderr.writeSync(new TextEncoder().encode("tsh: output truncated\n"));
}

function frame(f: Record<string, unknown>): void {
  Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(f) + "\n"));
}

/** Lines of history a REPL loads from its --history file. */
const HISTORY_LINES = 1000;

/** The last lines of a history file, oldest first; none when unreadable. */
function loadHistory(path: string): string[] {
  try {
    return Deno.readTextFileSync(path).split("\n").filter((l) => l !== "").slice(-HISTORY_LINES);
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.PermissionDenied, Deno.errors.IsADirectory);
    return [];
  }
}

/** Lines of stdin when it is not a terminal (a pipe or a file), without editing; null at EOF. */
function plainLines(): () => Promise<string | null> {
  const reader = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", done = false;
  return async () => {
    for (;;) {
      const nl = buf.indexOf("\n");
      if (nl >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        return line;
      }
      if (done) {
        const rest = buf;
        buf = "";
        return rest === "" ? null : rest;
      }
      const r = await reader.read();
      if (r.done) done = true;
      else buf += r.value;
    }
  };
}

async function repl(ctx: ShellContext, options: { history?: string } = {}): Promise<number> {
  const history = options.history;
  const tty = Deno.stdin.isTerminal();
  const editor = tty
    ? new LineEditor(denoTty, { history: history ? loadHistory(history) : [] })
    : undefined;
  const plain = tty ? undefined : plainLines();
  const prompt = tty ? "tsh> " : "";
  if (!tty) Deno.stdout.writeSync(new TextEncoder().encode("tsh> "));
  let code = 0;
  for (;;) {
    const line = editor ? await editor.readLine(prompt) : await plain!(); // one of the two is set
    if (line === null) break;
    editor?.remember(line);
    const args = words(line);
    if (history && line.trim() !== "") {
      try {
        Deno.writeTextFileSync(history, line + "\n", { append: true, mode: 0o600 });
      } catch (e) {
        ignore(
          e,
          Deno.errors.NotFound,
          Deno.errors.PermissionDenied,
          "EROFS",
        ); /* a read-only home keeps no history */
      }
    }
    if (args[0] === "exit") break;
    if (args.length) {
      const r = await operate(args, ctx);
      print(r);
      code = r.exitCode;
    }
    if (!tty) Deno.stdout.writeSync(new TextEncoder().encode("tsh> "));
  }
  return code;
}

/** Largest argument array --args-stdin takes (the runtime's frames are at most 1 MiB). */
const MAX_STDIN_ARGS = 8 * 1024 * 1024;

/**
 * The operation's words as one JSON array of strings on stdin (`--args-stdin`): the host passes
 * tool arguments this way so they never appear on a command line any local user can read.
 */
async function stdinArgs(): Promise<string[] | string> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of Deno.stdin.readable) {
    n += chunk.length;
    if (n > MAX_STDIN_ARGS) return `over ${MAX_STDIN_ARGS} bytes`;
    parts.push(chunk);
  }
  const bytes = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    bytes.set(p, off);
    off += p.length;
  }
  try {
    const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    if (Array.isArray(v) && v.every((a) => typeof a === "string")) return v;
  } catch { /* reported below */ }
  return "stdin is not one JSON array of strings";
}

/** tsh's own flags, read from the front of its argv; `rest` is the operation's words. */
interface TshFlags {
  json: boolean;
  root?: string;
  limit?: number;
  cache?: string;
  timeout?: string;
  argsStdin: boolean;
  nproc?: number;
  history?: string;
  rest: string[];
}

/** The flags before the operation's words; 0 when `-h` or `-V` answered already. */
function readFlags(argv: string[]): TshFlags | 0 {
  const f: TshFlags = { json: false, argsStdin: false, rest: [] };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--json") f.json = true;
    else if (a === "--root" && i + 1 < argv.length) f.root = argv[++i];
    else if (a === "--limit" && i + 1 < argv.length) f.limit = Number(argv[++i]);
    else if (a === "--cache" && i + 1 < argv.length) f.cache = argv[++i];
    else if (a === "--timeout" && i + 1 < argv.length) f.timeout = argv[++i];
    else if (a === "--nproc" && i + 1 < argv.length) f.nproc = Number(argv[++i]);
    else if (a === "--args-stdin") f.argsStdin = true;
    else if (a === "--history" && i + 1 < argv.length) f.history = argv[++i];
    else if (a === "-h" || a === "--help") {
      Deno.stdout.writeSync(new TextEncoder().encode(USAGE));
      return 0;
    } else if (a === "-V" || a === "--version") {
      // Needs no agent view: what a user checks first, outside any sandbox.
      Deno.stdout.writeSync(new TextEncoder().encode(`tsh ${VERSION}\n`));
      return 0;
    } else if (a === "--") {
      i++;
      break;
    } else break;
  }
  f.rest = argv.slice(i);
  return f;
}

/** The shell context the flags ask for, or the usage error (`EINVAL: ...`) they make. */
function flagContext(f: TshFlags): ShellContext | string {
  const { limit, nproc, timeout } = f;
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) {
    return "--limit must be a positive integer";
  }
  if (nproc !== undefined && !(Number.isInteger(nproc) && nproc > 0)) {
    return "--nproc must be a positive integer";
  }
  const seconds = timeout === undefined ? undefined : Number(timeout);
  if (seconds !== undefined && !(/^[0-9]+(\.[0-9]+)?$/.test(String(timeout)) && seconds > 0)) {
    return "--timeout must be a positive number of seconds";
  }
  let capacity: number | undefined;
  try {
    capacity = toolCache(f.cache);
  } catch (e) {
    return `--cache: ${(e as Error).message}`;
  }
  return context(readEnv(), {
    root: f.root,
    limit,
    cache: capacity,
    timeout: seconds === undefined ? undefined : Math.round(seconds * 1000),
    nproc,
  });
}

/** Runs tsh with `argv`; returns the exit code (the tool's own). */
export async function tshMain(argv: string[]): Promise<number> {
  const f = readFlags(argv);
  if (f === 0) return 0;
  const { json, argsStdin, history } = f;
  const ctx = flagContext(f);
  if (typeof ctx === "string") {
    Deno.stderr.writeSync(new TextEncoder().encode(`tsh: EINVAL: ${ctx}\n`));
    return 2;
  }
  let args = f.rest;
  if (argsStdin) {
    const got = await stdinArgs();
    if (typeof got === "string") {
      Deno.stderr.writeSync(new TextEncoder().encode(`tsh: EINVAL: --args-stdin: ${got}\n`));
      return 2;
    }
    args = [...args, ...got];
  }
  if (args.length === 0 && !json) return await repl(ctx, { history });
  if (json) {
    frame({ type: "start", agent: ctx.agent ?? null });
    frame({ type: "tool_call", name: args[0] ?? "tsh", args: args.slice(1) });
  }
  const r = await operate(args, ctx);
  if (json) {
    frame({ type: "tool_result", ...r });
    frame({ type: "done", status: r.status });
  } else print(r);
  return r.exitCode;
}
