/**
 * `ctx`: the human CLI. Argument parsing only; every command lives in src/ctx/. The commonest
 * command lines (`ctx`, `ctx status`, `ctx --version`, `ctx agent send ...`) start without
 * commander (src/ctx/quick.ts); every other one, and help, goes to cli/ctx_program.ts.
 */
import { quick, runQuick } from "../src/ctx/quick.ts";

const env = Deno.env.toObject();
// The checkout this ctx runs from: its dev mount (`deno task dev`) is found without CTX_ROOT.
// The built single file has no checkout (and no dev mount to look for).
const checkout = import.meta.url.endsWith(".ts")
  ? new URL("..", import.meta.url).pathname.replace(/\/$/, "")
  : undefined;
const q = quick(Deno.args);
if (q) await runQuick(q, { env, checkout });
else await (await import("./ctx_program.ts")).main(Deno.args, { env, checkout });
