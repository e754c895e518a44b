/** ctxterm's command line: the server (`--listen SOCKET -- CMD...`) and the two client modes (`watch|attach SOCKET`). */
import { CtxError } from "../abi/errno.ts";
import { VERSION } from "../abi/version.ts";
import { pickAllowed } from "../sandbox/env.ts";
import type { FsId } from "../sys/fsid.ts";
import { setCloexec } from "../sys/sock.ts";
import { join } from "./client.ts";
import { parseSizeArg, runTerminal } from "./main.ts";

/** Usage text. */
export const USAGE =
  `usage: ctxterm --listen SOCKET [--record DIR] [--alias PATH] [--id ID] [--agent A] [--session S]
               [--owner UID] [--size ROWSxCOLS] [--cwd DIR] [--show-cwd PATH] [--ready] -- CMD [ARGS...]
       ctxterm --listen SOCKET ... --sandbox AGENT --root TREE --uid UID --workspace DIR
                                   interactive tsh in AGENT's bubblewrap sandbox (no CMD)
               [--workspace-fd N]  the workspace as an inherited directory fd, instead of DIR
               [--hold]            do nothing before one "go" line on stdin (a supervisor's
                                   receipt is on disk by then); EOF before it: exit 0
       ctxterm watch SOCKET        read-only view of a terminal (Ctrl+] or Ctrl+C leaves)
       ctxterm attach SOCKET       join it read-write (Ctrl+] detaches)
The program starts with an environment of the sandbox allowlist only (CTX_* HOME USER LOGNAME
SHELL TERM LANG, and PATH); its window is --size, else LINES x COLUMNS, else 24x80, until the first
attacher sends its own. --record writes the terminal resource (meta.json state status owner cwd
events.jsonl) into DIR. --ready prints one JSON line on stdout once the socket listens.
`;

const FLAGS = new Set([
  "--listen",
  "--record",
  "--alias",
  "--id",
  "--agent",
  "--session",
  "--owner",
  "--size",
  "--cwd",
  "--show-cwd",
  "--sandbox",
  "--root",
  "--uid",
  "--workspace",
  "--workspace-fd",
]);

/** Reads stdin up to its first newline: the supervisor's release. Null at EOF before one. */
async function released(): Promise<string | null> {
  const reader = Deno.stdin.readable.getReader();
  const dec = new TextDecoder();
  let text = "";
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) return null;
      text += dec.decode(value, { stream: true });
    }
  } finally {
    reader.releaseLock();
  }
  return text.slice(0, text.indexOf("\n"));
}

/** Runs ctxterm with `argv`; returns its exit code (the program's, for the server). */
export async function ctxtermMain(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  if (argv[0] === "watch" || argv[0] === "attach") {
    if (!argv[1]) throw new CtxError("EINVAL", `usage: ctxterm ${argv[0]} SOCKET`);
    return await join({ socket: argv[1], mode: argv[0] });
  }
  const opt: Record<string, string> = {};
  let ready = false, hold = false;
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      i++;
      break;
    }
    if (a === "-h" || a === "--help") {
      Deno.stdout.writeSync(new TextEncoder().encode(USAGE));
      return 0;
    }
    if (a === "-V" || a === "--version") {
      Deno.stdout.writeSync(new TextEncoder().encode(`ctxterm ${VERSION}\n`));
      return 0;
    }
    if (a === "--ready") ready = true;
    else if (a === "--hold") hold = true;
    else if (FLAGS.has(a) && i + 1 < argv.length) opt[a.slice(2)] = argv[++i];
    else throw new CtxError("EINVAL", `unknown or incomplete option "${a}"\n${USAGE}`);
  }
  const cmd = argv.slice(i);
  // Held before anything is made: nothing exists that its supervisor has no receipt for.
  if (hold && (await released()) !== "go") return 0;
  const sandboxed = opt.sandbox !== undefined;
  if (!opt.listen || (cmd.length === 0) !== sandboxed) {
    throw new CtxError("EINVAL", USAGE.trimEnd());
  }
  if (!opt.listen.startsWith("/")) opt.listen = `${Deno.cwd()}/${opt.listen}`;
  const size = opt.size
    ? parseSizeArg(opt.size)
    : env.LINES && env.COLUMNS
    ? parseSizeArg(`${env.LINES}x${env.COLUMNS}`)
    : { rows: 24, cols: 80 };
  const owner = opt.owner === undefined ? undefined : Number(opt.owner);
  if (owner !== undefined && !(Number.isInteger(owner) && owner >= 0)) {
    throw new CtxError("EINVAL", `--owner "${opt.owner}" is not a uid`);
  }
  let program: { argv: string[]; env: Record<string, string>; inherit?: number[] } = {
    argv: cmd,
    env: { TERM: "xterm-256color", ...pickAllowed(env) },
  };
  let as: FsId | undefined, cleanup: (() => void) | undefined, shownCwd = opt["show-cwd"];
  let shownCommand: string[] | undefined;
  if (sandboxed) {
    const uid = Number(opt.uid ?? Deno.uid());
    const wsFd = opt["workspace-fd"] === undefined ? undefined : Number(opt["workspace-fd"]);
    if (wsFd !== undefined && !(Number.isInteger(wsFd) && wsFd > 2)) {
      throw new CtxError("EINVAL", `--workspace-fd "${opt["workspace-fd"]}" is not an fd above 2`);
    }
    if (!opt.root || (!opt.workspace) === (wsFd === undefined) || !Number.isInteger(uid)) {
      throw new CtxError(
        "EINVAL",
        "--sandbox needs --root TREE, --uid UID and one of --workspace DIR or --workspace-fd N",
      );
    }
    // An inherited fd is never passed on: the program on the PTY gets only the view's own.
    if (wsFd !== undefined) setCloexec(wsFd);
    const { agentShell } = await import("./sandbox.ts");
    const shell = await agentShell({
      root: opt.root,
      agent: opt.sandbox,
      uid,
      workspace: wsFd === undefined ? opt.workspace : { fd: wsFd },
      env,
    });
    program = { argv: shell.argv, env: shell.env, inherit: shell.fds };
    // A root-run terminal writes the session's files as the agent identity owning them.
    if (Deno.uid() === 0 && shell.as.uid !== 0) as = shell.as;
    cleanup = shell.cleanup;
    shownCwd ??= "/workspace";
    shownCommand = ["tsh"];
  }
  return await runTerminal({
    listen: opt.listen,
    alias: opt.alias,
    record: opt.record,
    as,
    cleanup,
    argv: program.argv,
    env: program.env,
    inherit: program.inherit,
    cwd: opt.cwd,
    shownCwd,
    shownCommand,
    size,
    owner,
    id: opt.id,
    agent: opt.agent,
    session: opt.session,
    ready: ready ? (info) => console.log(JSON.stringify({ ready: true, ...info })) : undefined,
  });
}
