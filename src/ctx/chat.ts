/** `ctx agent chat|resume`: the human chat UI (line editing, history, buffered output, Ctrl+C). */
import readline from "node:readline";
import { PassThrough } from "node:stream";
import process from "node:process";
import type { Command } from "commander";
import { type Errno, exitCode, isErrno, toCtxError } from "../abi/errno.ts";
import type { AgentContext } from "./agent.ts";
import { AgentClient, pickSession, requestId } from "./client.ts";
import { guarded } from "./fail.ts";
import { allows, approvalPrompt, deniedNote, styleFor, Transcript } from "./render.ts";
import { follow, sendRequest } from "./stream.ts";

const collect = (v: string, all: string[]) => [...all, v];

/** Options of `ctx agent chat`. */
export interface ChatArgs {
  session?: string;
  verbose?: boolean;
  approve: string[];
}

/** Prints the stored conversation of a session (the `resume` op); returns false if it does not exist. */
async function printHistory(client: AgentClient, agent: string, session: string): Promise<number> {
  client.send({ op: "resume", session });
  for (;;) {
    const f = await client.next();
    if (!f) return 69;
    if (f.type === "history") {
      const who = f.role === "user" ? "you" : f.role === "assistant" ? agent : "tool";
      console.log(
        `${who}: ${typeof f.content === "string" ? f.content : JSON.stringify(f.content)}`,
      );
    } else if (f.type === "status") {
      console.log(`[session ${f.session}: ${f.status}, ${f.runs} runs]`);
      return 0;
    } else if (f.type === "error") {
      console.error(`ctx: ${f.code}: agent/${agent}: ${f.message}`);
      return exitCode(isErrno(String(f.code)) ? f.code as Errno : "EIO");
    }
  }
}

/**
 * readline's input on a terminal, fed by Deno.stdin (whose reads run off the main thread), with
 * raw mode set on fd 0 itself. Deno's node `process.stdin` reads a terminal the process cannot
 * reopen (after `su - user` the pty is root's, 0600) with a blocking read on the main thread:
 * the chat then stalled until the next key, every answer unseen (issue 25 item 2).
 */
function ttyInput(): { input: NodeJS.ReadableStream; stop(): void } {
  const input = new PassThrough();
  Object.assign(input, {
    isTTY: true,
    setRawMode(on: boolean) {
      Deno.stdin.setRaw(on);
      return input;
    },
  });
  const reader = Deno.stdin.readable.getReader();
  (async () => {
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) input.write(r.value);
    } catch { /* any kind: whatever ends stdin (a stop, a gone terminal) ends the input */ }
    input.end();
  })();
  return {
    input,
    stop: () => void reader.cancel().catch(() => {}),
  };
}

/**
 * The interactive loop: one connection, one run at a time; answer text printed a whole line at a
 * time, tool calls as one line each, approvals asked `[y/N]` on the terminal.
 */
export async function chat(root: string, agent: string, o: ChatArgs): Promise<number> {
  const { loadAgent } = await import("../store/agent.ts");
  const session = pickSession(
    root,
    loadAgent(root, agent, { secrets: false }).uid,
    agent,
    o.session,
  );
  const client = await AgentClient.connect(root, agent);
  const interactive = Boolean(process.stdin.isTTY);
  const tty = interactive ? ttyInput() : undefined;
  const rl = readline.createInterface({
    input: tty?.input ?? process.stdin,
    output: process.stdout,
    terminal: interactive,
    historySize: 1000,
    prompt: `${agent}> `,
  });
  const c = new Chat(client, rl, session, o, interactive);
  const closed = new Promise<void>((resolve) =>
    rl.on("close", () => {
      c.open = false;
      resolve();
    })
  );
  rl.on("line", (line) => {
    if (line.trim() === "") return rl.prompt();
    c.pending.push(line);
    void c.drain();
  });
  rl.on("SIGINT", () => c.interrupt());
  rl.prompt();
  await closed;
  tty?.stop();
  if (c.active) client.send({ op: "cancel", id: c.active });
  client.close();
  process.stdout.write("\n");
  return 0;
}

/** The chat's state between readline's events: the run in flight, lines typed ahead, a question. */
class Chat {
  active: string | undefined;
  busy = false;
  /**
   * Ctrl+C came while the request waited for its `start` (queued behind another run of the
   * session): there is no run id to cancel yet, so the cancel is sent the moment `start` arrives.
   */
  cancelOnStart = false;
  open = true;
  /** Set while an approval question waits for its y/N answer: Ctrl+C there cancels the run. */
  asking: (() => void) | undefined;
  readonly pending: string[] = [];
  readonly style = styleFor({
    terminal: Boolean(process.stdout.isTTY),
    env: Deno.env.toObject(),
  });

  constructor(
    readonly client: AgentClient,
    readonly rl: readline.Interface,
    readonly session: string,
    readonly o: ChatArgs,
    readonly interactive: boolean,
  ) {}

  /** Writes above the line being typed, then re-draws the prompt with the user's partial input. */
  show = (text: string) => {
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
    process.stdout.write(text.endsWith("\n") ? text : text + "\n");
    if (this.open) this.rl.prompt(true); // a closed readline throws on prompt()
  };

  async drain() {
    while (!this.busy && this.pending.length) await this.runOne(this.pending.shift()!); // length checked in the loop
  }

  /** Sends one typed line and shows its run until it ends. */
  async runOne(line: string) {
    const { client, o, show } = this;
    this.busy = true;
    const id = requestId();
    try {
      sendRequest(client, { op: "send", id, session: this.session, scope: "private", input: line });
    } catch (e) {
      this.busy = false;
      this.cancelOnStart = false;
      return show(`[${toCtxError(e).errno}: ${toCtxError(e).message}]`);
    }
    // Answer text is held until its step ends (a partial line would fight the prompt);
    // tool lines, approvals and errors are shown as they happen.
    let held = "";
    const flush = () => {
      if (held !== "") show(held.replace(/\n$/, ""));
      held = "";
    };
    const shown = new Transcript({
      text: (t) => held += t,
      line: (l) => {
        flush();
        show(l);
      },
    }, { verbose: o.verbose, style: this.style });
    const out = await follow(client, {
      id,
      onStart: (r) => {
        this.active = r;
        if (!this.cancelOnStart) return;
        this.cancelOnStart = false;
        client.send({ op: "cancel", id: r });
      },
      decide: (f) => {
        if (o.approve.includes(String(f.name))) return true;
        if (!this.interactive || !this.open) {
          shown.note(deniedNote(f));
          return false;
        }
        flush();
        return this.question(approvalPrompt(f));
      },
      onFrame: (f) => {
        if (f.type === "error") shown.note(`[${f.code}: ${f.message}]`);
        else shown.frame(f);
      },
    });
    this.active = undefined;
    this.busy = false;
    this.cancelOnStart = false;
    flush();
    if (out.status === "cancelled") show("[cancelled]");
    else if (out.status === "lost") show("[connection lost]");
    if (out.status === "lost") this.rl.close();
  }

  /** Asks an approval on the prompt's line: the answer, or undefined when Ctrl+C abandons it. */
  question(prompt: string): Promise<boolean | undefined> {
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
    return new Promise<boolean | undefined>((resolve) => {
      const ac = new AbortController();
      this.asking = () => {
        ac.abort();
        resolve(undefined);
      };
      this.rl.question(prompt, { signal: ac.signal }, (answer) => {
        this.asking = undefined;
        resolve(allows(answer));
      });
    });
  }

  /** Ctrl+C: cancels the run (at an approval prompt too) and drops typed-ahead lines; idle, leaves. */
  interrupt() {
    const { client } = this;
    if (this.asking) {
      // At an approval prompt Ctrl+C cancels the run (the cancel ends the approval too).
      const abandon = this.asking;
      this.asking = undefined;
      this.pending.length = 0;
      if (this.active) client.send({ op: "cancel", id: this.active });
      abandon();
      this.show("^C");
      return;
    }
    if (this.busy) {
      // A run is active (or about to start): cancel it, drop typed-ahead lines, stay in the chat.
      this.pending.length = 0;
      if (this.active) client.send({ op: "cancel", id: this.active });
      else this.cancelOnStart = true;
      this.show("^C");
      return;
    }
    this.rl.close(); // idle: Ctrl+C leaves
  }
}

/** Adds `chat` and `resume` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  agent
    .command("chat")
    .alias("repl")
    .description("interactive chat (Ctrl+C cancels a run; Ctrl+C when idle exits)")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("-v, --verbose", "print each tool call's whole result, not only its status line")
    .option(
      "--approve <tool>",
      "answer allow_once for this tool (repeatable); others are asked [y/N]",
      collect,
      [],
    )
    .action((name: string, o: ChatArgs) =>
      guarded(`agent/${name}`, () => chat(ctx.root(), name, o))
    );
  agent
    .command("resume")
    .description("print a session's conversation, then continue it interactively on a terminal")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("-v, --verbose", "print each tool call's whole result, not only its status line")
    .option("--approve <tool>", "answer allow_once for this tool (repeatable)", collect, [])
    .action((name: string, o: ChatArgs) =>
      guarded(`agent/${name}`, async () => {
        const root = ctx.root();
        const { loadAgent } = await import("../store/agent.ts");
        const session = pickSession(
          root,
          loadAgent(root, name, { secrets: false }).uid,
          name,
          o.session,
        );
        const client = await AgentClient.connect(root, name);
        const code = await printHistory(client, name, session).finally(() => client.close());
        if (code !== 0 || !Deno.stdin.isTerminal()) return code;
        return chat(root, name, { ...o, session });
      })
    );
}
