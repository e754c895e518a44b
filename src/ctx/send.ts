/** `ctx agent send|tsh|cancel`: non-interactive socket commands for humans and scripts. */
import type { Command } from "commander";
import { CtxError, type Errno, exitCode, isErrno } from "../abi/errno.ts";
import type { AgentContext } from "./agent.ts";
import { AgentClient, type ClientFrame, pickSession, requestId } from "./client.ts";
import { guarded } from "./fail.ts";
import { allows, approvalPrompt, deniedNote, styleFor, Transcript } from "./render.ts";
import { follow, outcomeExit, sendRequest } from "./stream.ts";
import { checkAgent } from "./uid.ts";

const collect = (v: string, all: string[]) => [...all, v];
const exitOf = (e: string) => exitCode(isErrno(e) ? e : "EIO" as Errno);

/** Options of `ctx agent send`. */
export interface SendArgs {
  session?: string;
  scope?: string;
  cwd?: string;
  id?: string;
  json?: boolean;
  verbose?: boolean;
  approve: string[];
  /** Approval requests for other tools are asked on the terminal (stdin and stderr are one). */
  ask?: boolean;
}

/**
 * Reads one line from stdin (the answer to a prompt): "" at end of input, undefined when
 * `signal` aborts first (the pending read is cancelled, so nothing keeps the process alive).
 */
async function readLine(signal: AbortSignal): Promise<string | undefined> {
  const reader = Deno.stdin.readable.getReader();
  const abandon = () => void reader.cancel().catch(() => {});
  signal.addEventListener("abort", abandon);
  const dec = new TextDecoder();
  let s = "";
  try {
    while (!s.includes("\n")) {
      const { value, done } = await reader.read();
      if (signal.aborted) return undefined;
      if (done) break;
      s += dec.decode(value, { stream: true });
    }
    return s;
  } finally {
    signal.removeEventListener("abort", abandon);
    reader.releaseLock();
  }
}

/**
 * A client connected to `agent`'s socket, and the tree it was found in. Nothing is read before the
 * connection: the first place the tree would be looked for is tried at once (findTree, which
 * words every failure, runs only when that connect fails). When nothing answers, the whole agent
 * is checked first: a bad control is reported as it always was, before the connect's failure.
 */
async function connect(
  where: Where,
  agent: string,
): Promise<{ client: AgentClient; root: string }> {
  const first = where.guess?.();
  const client = first === undefined ? undefined : await AgentClient.tryConnect(first, agent);
  const root = client && first !== undefined ? first : where.root();
  if (client) return { client, root };
  try {
    return { client: await AgentClient.connect(root, agent), root };
  } catch (e) {
    await checkAgent(root, agent);
    throw e;
  }
}

/** stdout is the answer; a secondary line (stderr) first ends the answer's partial line. */
class Output {
  midLine = false;
  readonly #enc = new TextEncoder();

  out(s: string) {
    Deno.stdout.writeSync(this.#enc.encode(s));
  }

  /** Answer text, on stdout. */
  text = (s: string) => {
    this.out(s);
    this.midLine = !s.endsWith("\n");
  };

  /** Ends the answer's partial line, if there is one. */
  endLine() {
    if (this.midLine) this.out("\n");
    this.midLine = false;
  }

  /** A secondary line (tool calls, approvals, errors), on stderr. */
  line = (s: string) => {
    this.endLine();
    this.err(s + "\n");
  };

  err(s: string) {
    Deno.stderr.writeSync(this.#enc.encode(s));
  }
}

/**
 * Asks `prompt` on the terminal (stderr, answered on stdin): the answer, or undefined when
 * Ctrl+C came first (`setAsking` gets the function that abandons the question meanwhile).
 */
async function ask(
  sink: Output,
  prompt: string,
  setAsking: (abandon: (() => void) | undefined) => void,
): Promise<string | undefined> {
  sink.endLine();
  sink.err(prompt);
  const ac = new AbortController();
  setAsking(() => ac.abort());
  const answer = await readLine(ac.signal).catch(() => "");
  setAsking(undefined);
  // Ctrl+C (the terminal echoed ^C) or end of input: end the prompt's line.
  if (answer === undefined || answer === "") sink.err("\n");
  return answer;
}

/**
 * Sends one message and streams the answer to stdout; tool calls, approvals and errors go to
 * stderr, one line each. Returns the exit status.
 */
export async function send(
  where: Where,
  agent: string,
  input: string,
  o: SendArgs,
): Promise<number> {
  // Without --session the request names no session (`null`: the runtime picks the scope's
  // index/current, else default). When nothing starts (the daemon refuses the request), the
  // whole agent is checked first: a bad control is reported before anything the daemon said.
  const { client, root } = await connect(where, agent);
  let active: string | undefined;
  let interrupts = 0;
  // Set while an approval question waits for its y/N answer.
  let asking: (() => void) | undefined;
  const onSig = () => {
    // First Ctrl+C cancels the run (at an approval prompt too); a second one leaves at once.
    if (++interrupts > 1 || !active) Deno.exit(130);
    client.send({ op: "cancel", id: active });
    asking?.();
  };
  Deno.addSignalListener("SIGINT", onSig);
  try {
    const id = o.id ?? requestId();
    sendRequest(client, {
      op: "send",
      id,
      session: o.session ?? null,
      scope: o.scope ?? "private",
      ...(o.cwd ? { cwd: o.cwd } : {}),
      input,
    });
    const sink = new Output();
    const shown = new Transcript(sink, {
      verbose: o.verbose,
      style: styleFor({ terminal: Deno.stderr.isTerminal(), env: Deno.env.toObject() }),
    });
    const show = (f: ClientFrame) => {
      if (o.json) return sink.out(JSON.stringify(f) + "\n");
      if (f.type === "error") sink.line(`ctx: ${f.code}: agent/${agent}: ${f.message}`);
      else shown.frame(f);
    };
    // Frames before `start` (a refusal) wait until the agent is checked.
    let started = false;
    const held: ClientFrame[] = [];
    const result = await follow(client, {
      id,
      onStart: (r) => active = r,
      decide: async (f) => {
        if (o.approve.includes(String(f.name))) return true;
        if (!o.ask || o.json) {
          if (!o.json) shown.note(deniedNote(f));
          return false;
        }
        const answer = await ask(sink, approvalPrompt(f), (a) => asking = a);
        return answer === undefined ? undefined : allows(answer);
      },
      onFrame: (f) => {
        if (f.type === "start" && !started) {
          started = true;
          held.splice(0).forEach(show);
        }
        if (started) show(f);
        else held.push(f); // shown once the agent is known good (below), or at `start`
      },
    });
    if (!started) await checkAgent(root, agent);
    held.splice(0).forEach(show);
    if (sink.midLine) sink.out("\n");
    if (result.status === "lost" && !o.json) sink.line(lostLine(agent, result.run));
    return outcomeExit(result, exitOf);
  } finally {
    Deno.removeSignalListener("SIGINT", onSig);
    client.close();
  }
}

/**
 * The line for a stream that ended before its run did (exit 69, EHOSTDOWN's): never a silent
 * exit. A run that had started is in the session's history whatever happened to this connection.
 */
export function lostLine(agent: string, run?: string): string {
  return `ctx: EHOSTDOWN: agent/${agent}: the connection closed before the ${
    run ? `run ${run}` : "request"
  } ended${run ? "; its record stays in the session (ctx agent history " + agent + ")" : ""}` +
    `; the daemon's log (agent/${agent}.d/log) says why`;
}

/** Runs one `tsh` op; prints the tool result; returns the exit status. */
export async function tsh(
  root: string,
  agent: string,
  args: string[],
  o: { session?: string; id?: string; json?: boolean },
): Promise<number> {
  const session = pickSession(root, await checkAgent(root, agent), agent, o.session);
  const client = await AgentClient.connect(root, agent);
  const enc = new TextEncoder();
  try {
    const id = o.id ?? requestId("tsh");
    sendRequest(client, { op: "tsh", id, session, args });
    const out = await follow(client, {
      id,
      onFrame: (f) => {
        if (o.json) Deno.stdout.writeSync(enc.encode(JSON.stringify(f) + "\n"));
        else if (f.type === "error" && !f.run) {
          console.error(`ctx: ${f.code}: agent/${agent}: ${f.message}`);
        }
      },
    });
    if (!o.json) {
      for (const r of out.results) {
        const text = r.content.endsWith("\n") || r.content === "" ? r.content : r.content + "\n";
        (r.status === "error" ? Deno.stderr : Deno.stdout).writeSync(enc.encode(text));
        if (r.errno) console.error(`ctx: ${r.errno}: agent/${agent}: tsh ${args.join(" ")}`);
      }
    }
    if (out.status === "lost" && !o.json) console.error(lostLine(agent, out.run));
    const err = out.results.find((r) => r.errno)?.errno;
    return outcomeExit(err && out.status === "error" ? { ...out, errno: err } : out, exitOf);
  } finally {
    client.close();
  }
}

/** Cancels a run; prints its resulting status. */
export async function cancel(root: string, agent: string, run: string): Promise<number> {
  const client = await AgentClient.connect(root, agent);
  try {
    client.send({ op: "cancel", id: run });
    for (;;) {
      const f = await client.next();
      if (!f) return 69;
      if (f.type === "ack") {
        console.log(`${run}\t${f.status}`);
        return 0;
      }
      if (f.type === "error") {
        console.error(`ctx: ${f.code}: agent/${agent}: ${f.message}`);
        return exitOf(String(f.code));
      }
    }
  } finally {
    client.close();
  }
}

async function readStdin(): Promise<string> {
  return await new Response(Deno.stdin.readable).text();
}

/** Where `send` finds the tree: `root()` (checked), and `guess()`, a place to try first unchecked. */
export interface Where {
  root(): string;
  guess?(): string | undefined;
}

/**
 * `ctx agent send NAME [WORDS...]` once parsed (by commander, or by quick.ts without it): the
 * message is the words, else stdin; sets the exit code.
 */
export function sendCommand(
  ctx: Where,
  name: string,
  words: string[],
  o: SendArgs,
): Promise<void> {
  return guarded(`agent/${name}`, async () => {
    const input = words.length ? words.join(" ") : await readStdin();
    // Ask only a person: stdin free (the message came as words) and a terminal on both ends.
    o.ask = words.length > 0 && Deno.stdin.isTerminal() && Deno.stderr.isTerminal();
    if (input === "") {
      // Nothing to say is a usage mistake (a script with an empty pipe), never an empty run.
      throw new CtxError("EINVAL", "no message: give words or pipe text on stdin");
    }
    return send(ctx, name, input, o);
  });
}

/** Adds `send`, `tsh` and `cancel` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  agent
    .command("send")
    .description("send one message and stream the answer (exit status = the run's outcome)")
    .argument("<agent>", "agent name")
    .argument("[input...]", "message text (default: stdin)")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("--scope <scope>", "private (default), shared or temp")
    .option("--cwd <path>", "working directory inside the agent view")
    .option("--id <id>", "client request id (repeat it to replay the stored result)")
    .option("--json", "print the raw frames")
    .option("-v, --verbose", "print each tool call's whole result, not only its status line")
    .option(
      "--approve <tool>",
      "answer allow_once for this tool (repeatable); others are asked on a terminal, else denied",
      collect,
      [],
    )
    .action((name: string, words: string[], o: SendArgs) => sendCommand(ctx, name, words, o));
  agent
    .command("tsh")
    .description("run one tsh command through the agent's authority path (no model call)")
    .argument("<agent>", "agent name")
    .argument("<args...>", "tsh arguments")
    .option("-s, --session <name>", "session")
    .option("--id <id>", "client request id")
    .option("--json", "print the raw frames")
    .action((name: string, args: string[], o: { session?: string; id?: string; json?: boolean }) =>
      guarded(`agent/${name}`, () => tsh(ctx.root(), name, args, o))
    );
  agent
    .command("cancel")
    .description("cancel an active run")
    .argument("<agent>", "agent name")
    .argument("<run>", "run id (ctx-...)")
    .action((name: string, run: string) =>
      guarded(`agent/${name}`, () => cancel(ctx.root(), name, run))
    );
}
