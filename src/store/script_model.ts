/** Migration 5 `debug-script-model`: adds `model/debug/script`, the offline model that replays a script file. */
import { syncDir } from "./atomic.ts";
import { makeDir, modelEntry, type TreeContext, writeAll } from "./tree.ts";

/** The scripted test model and its known context limit (tokens). */
export const SCRIPT_MODEL = { ref: "debug/script", limit: 131072 } as const;

/** What the entry says the model does. */
const DESCRIPTION = "Built-in test model: replays the agent's script file (spec/models.md).";

/**
 * Adds `model/debug/script` (driver `debug-script`, `default` naming `script.jsonl` in the agent
 * home), controls first and the entry last. A tree that already has a `debug/script` entry or
 * control directory keeps it untouched.
 */
export function addScriptModel(dir: string, ctx: TreeContext): void {
  const base = `${dir}/model/${SCRIPT_MODEL.ref}`;
  for (const p of [base, `${base}.d`]) {
    try {
      Deno.lstatSync(p);
      return;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  makeDir(`${dir}/model/debug`);
  makeDir(`${base}.d`);
  writeAll(`${base}.d`, {
    driver: "debug-script\n",
    cap: "chat\nstream\ntool_call_syntax\n",
    limit: `${SCRIPT_MODEL.limit}\n`,
    default: "script=script.jsonl\n",
    fallback: "",
    session: "none\n",
    effort: "auto\n",
  });
  writeAll(`${dir}/model/debug`, {
    script: modelEntry(SCRIPT_MODEL.ref, { ...ctx, ...SCRIPT_MODEL, description: DESCRIPTION }),
  }, { mode: 0o555 });
  syncDir(`${dir}/model`);
}
