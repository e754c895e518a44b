/** `ctxterm`: owns one pseudo-terminal and serves watchers and attachers on a Unix socket (see src/term/). */
import { toCtxError } from "../src/abi/errno.ts";
import { ctxtermMain } from "../src/term/cli.ts";

try {
  Deno.exit(await ctxtermMain(Deno.args, Deno.env.toObject()));
} catch (e) {
  const err = toCtxError(e);
  console.error(`ctxterm: ${err.errno}: ${err.path ? `${err.path}: ` : ""}${err.message}`);
  Deno.exit(err.errno === "EINVAL" ? 2 : 1);
}
