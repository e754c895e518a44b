/** `ctx agent chat|resume`: the human chat UI (line editing, history, buffered output, Ctrl+C). */
import readline from "node:readline";
import process from "node:process";
import type { Command } from "commander";
import { type Errno, exitCode, isErrno, toCtxError } from "../abi/errno.ts";
import type { AgentContext } from "./agent.ts";
import { AgentClient, pickSession, requestId } from "./client.ts";
import { guarded } from "./fail.ts";
import { follow, sendRequest } from "./stream.ts";

const collect = (v: string, all: string[]) => [...all, v];

/** Options of `ctx agent chat`. */
export interface ChatArgs {
  session?: string;
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

/** The interactive loop: one connection, one run at a time, output printed whole at the end. */
export async function chat(root: string, agent: string, o: ChatArgs): Promise<number> {
  const { loadAgent } = await import("../store/agent.ts");
  const session = pickSession(
    root,
    loadAgent(root, agent, { secrets: false }).uid,
    agent,
    o.session,
  );
  const client = await AgentClient.connect(root, agent);
  const rl = readline.createInterface({
    input: process.stdin,
    output: process.stdout,
    terminal: Boolean(process.stdin.isTTY),
    historySize: 1000,
    prompt: `${agent}> `,
  });
  let active: string | undefined;
  let busy = false;
  // Ctrl+C came while the request waited for its `start` (queued behind another run of the
  // session): there is no run id to cancel yet, so the cancel is sent the moment `start` arrives.
  let cancelOnStart = false;
  let open = true;
  const pending: string[] = [];
  // Writes above the line being typed, then re-draws the prompt with the user's partial input.
  const show = (text: string) => {
    readline.clearLine(process.stdout, 0);
    readline.cursorTo(process.stdout, 0);
    process.stdout.write(text.endsWith("\n") ? text : text + "\n");
    if (open) rl.prompt(true); // a closed readline throws on prompt()
  };
  const runOne = async (line: string) => {
    busy = true;
    const id = requestId();
    try {
      sendRequest(client, { op: "send", id, session, scope: "private", input: line });
    } catch (e) {
      busy = false;
      cancelOnStart = false;
      return show(`[${toCtxError(e).errno}: ${toCtxError(e).message}]`);
    }
    let notes = "";
    const out = await follow(client, {
      id,
      approve: o.approve,
      onStart: (r) => {
        active = r;
        if (!cancelOnStart) return;
        cancelOnStart = false;
        client.send({ op: "cancel", id: r });
      },
      onFrame: (f) => {
        if (
          f.type === "approval_request" && f.replay !== true && !o.approve.includes(String(f.name))
        ) {
          notes += `[approval for ${f.name} denied; rerun with --approve ${f.name}]\n`;
        } else if (f.type === "error") notes += `[${f.code}: ${f.message}]\n`;
      },
    });
    active = undefined;
    busy = false;
    cancelOnStart = false;
    const tail = out.status === "cancelled"
      ? "[cancelled]\n"
      : out.status === "lost"
      ? "[connection lost]\n"
      : "";
    show(`${out.text ? out.text + "\n" : ""}${notes}${tail}`.replace(/\n$/, ""));
    if (out.status === "lost") rl.close();
  };
  const drain = async () => {
    while (!busy && pending.length) await runOne(pending.shift()!); // length checked in the loop
  };
  const closed = new Promise<void>((resolve) =>
    rl.on("close", () => {
      open = false;
      resolve();
    })
  );
  rl.on("line", (line) => {
    if (line.trim() === "") return rl.prompt();
    pending.push(line);
    void drain();
  });
  rl.on("SIGINT", () => {
    if (busy) {
      // A run is active (or about to start): cancel it, drop typed-ahead lines, stay in the chat.
      pending.length = 0;
      if (active) client.send({ op: "cancel", id: active });
      else cancelOnStart = true;
      show("^C");
      return;
    }
    rl.close(); // idle: Ctrl+C leaves
  });
  rl.prompt();
  await closed;
  if (active) client.send({ op: "cancel", id: active });
  client.close();
  process.stdout.write("\n");
  return 0;
}

/** Adds `chat` and `resume` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  agent
    .command("chat")
    .alias("repl")
    .description("interactive chat (Ctrl+C cancels a run; Ctrl+C when idle exits)")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("--approve <tool>", "answer allow_once for this tool (repeatable)", collect, [])
    .action((name: string, o: ChatArgs) =>
      guarded(`agent/${name}`, () => chat(ctx.root(), name, o))
    );
  agent
    .command("resume")
    .description("print a session's conversation, then continue it interactively on a terminal")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
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
