/** Test entry: `ctx agent ...` with the runtime's client commands registered (cli/ctx.ts gets the same). */
import { Command, CommanderError } from "commander";
import { addAgentCommands, agentContext } from "../../src/ctx/mod.ts";
import { register as chat } from "../../src/ctx/chat.ts";
import { register as history } from "../../src/ctx/history.ts";
import { register as send } from "../../src/ctx/send.ts";

const program = new Command("ctx").option("-r, --root <path>", "tree").exitOverride();
addAgentCommands(program.command("agent"), agentContext(program, Deno.env.toObject()), [
  chat,
  send,
  history,
]);
try {
  await program.parseAsync(Deno.args, { from: "user" });
} catch (e) {
  if (e instanceof CommanderError) Deno.exitCode = e.exitCode === 0 ? 0 : 2;
  else throw e;
}
