/**
 * The `ctx agent` command group. This module only wires subcommands; each action lazy-imports its
 * implementation so `ctx status`/`ctx ls` never load it. The runtime adds `chat send resume
 * cancel history tsh ...` to the same group through {@link addAgentCommands}'s `extra` hook.
 */
import type { Command } from "commander";
import { guarded } from "./fail.ts";
import { findTree } from "./root.ts";
import { NAME_TEXT } from "../abi/names.ts";

/** What an agent subcommand needs from the top level: the tree root and the environment. */
/** `ctx terminal`'s one-line help: also listed when src/ctx/terminal.ts is not loaded. */
export const TERMINAL_HELP = "persistent terminal resources (session/<s>/terminal/<id>/)";

export interface AgentContext {
  /** The tree root (--root, CTX_ROOT or the mount found; throws when there is none). */
  root(): string;
  env: Record<string, string | undefined>;
}

/** A function that adds more subcommands to the `agent` group (the runtime's chat/send/...). */
export type AgentExtension = (agent: Command, ctx: AgentContext) => void;

/** Adds `ctx agent new` (and every extension's subcommands) to the `agent` command. */
export function addAgentCommands(
  agent: Command,
  ctx: AgentContext,
  extra: readonly AgentExtension[] = [],
): Command {
  agent
    .command("new")
    .description("create an agent: controls first, agent/NAME last")
    .argument("<name>", `agent name (${NAME_TEXT})`)
    .option("--model <ref>", "model reference (provider/model or alias; default: model/main)")
    .option("--perm <triplet>", "capability ceiling, ---..rwx (default rwx)")
    .option("--window <w>", "auto or a token count <= the model's limit (default auto)")
    .option("--exec <program>", "install this program as agent/NAME (abi sdk-envelope-v1)")
    .action((name: string, o: { model?: string; perm?: string; window?: string; exec?: string }) =>
      guarded(`agent/${name}`, async () => {
        const { createAgent } = await import("../store/agent_new.ts");
        const path = createAgent(ctx.root(), name, {
          ...o,
          uid: Deno.uid() ?? 0,
          gid: Deno.gid() ?? 0,
        });
        console.log(path);
      })
    );
  agent
    .command("prompt")
    .description(
      "print the system prompt a run would send now (the runtime's renderer), with token estimates",
    )
    .argument("<name>", "agent name")
    .option("-s, --session <name>", "session whose history is estimated (default: current)")
    .option("--cwd <path>", "cwd inside the agent view (default: the agent's cwd control)")
    .action((name: string, o: { session?: string; cwd?: string }) =>
      guarded(`agent/${name}`, async () => {
        const { prompt } = await import("./prompt.ts");
        Deno.exitCode = prompt(ctx.root(), name, o);
      })
    );
  // Later subcommands (chat send resume cancel history tsh watch attach start stop ...) go here.
  for (const add of extra) add(agent, ctx);
  return agent;
}

/**
 * The default context: the tree from --root (read lazily from the program), CTX_ROOT, or the
 * first live mount found (`/ctx`, then `checkout`'s dev mount); looked up once.
 */
export function agentContext(
  program: Command,
  env: Record<string, string | undefined>,
  options: { checkout?: string } = {},
): AgentContext {
  let found: string | undefined;
  return {
    root: () => found ??= findTree({ root: program.opts().root, env, ...options }).root,
    env,
  };
}
