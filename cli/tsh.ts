/** tsh entry point: the agent-facing tool shell (see src/tool/main.ts). */
import { tshMain } from "../src/tool/main.ts";

Deno.exit(await tshMain(Deno.args));
