/** The tools a model-backed run offers: `tsh`, then the agent's `.d/tools` declarations, each under a wire-safe name. */
import type { ToolSpec } from "../model/driver.ts";
import { loadTool } from "../store/agent.ts";
import { CtxError, ignore } from "../abi/errno.ts";

/** The native `tsh` tool as offered to a model. */
export const TSH_TOOL: ToolSpec = {
  name: "tsh",
  description: "Run one CortexFS tool shell command. args is its argv, e.g. " +
    '["fs.read","notes.txt"], ["fs.list","."], ["tools"], ["help"]. The workspace is the cwd.',
  parameters: {
    type: "object",
    properties: { args: { type: "array", items: { type: "string" } } },
    required: ["args"],
    additionalProperties: false,
  },
};

/** Tools offered to a model: `tsh`, then `.d/tools` declarations, each under a wire-safe name. */
export interface Offer {
  specs: ToolSpec[];
  /** Wire name -> the tool's real name (`fs_read` -> `fs.read`). */
  names: Map<string, string>;
}

/**
 * The tools a model-backed run offers: `tsh` and the agent's direct-native declarations (names
 * made `[A-Za-z0-9_-]`, a clash dropped; schema and description from `tool/<name>.d/` when the
 * system tool exists, else an open object). Offering grants nothing: every call is authorized
 * afresh by executeCall.
 */
export function offerTools(root: string, declared: readonly string[]): Offer {
  const specs = [TSH_TOOL];
  const names = new Map([["tsh", "tsh"]]);
  for (const real of declared) {
    const wire = real.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
    if (names.has(wire)) continue;
    let description = `The CortexFS tool ${real}.`;
    let parameters: Record<string, unknown> = { type: "object" };
    try {
      const t = loadTool(`${root}/tool`, real);
      description = t.description.trim();
      parameters = t.schema as Record<string, unknown>;
    } catch (e) {
      ignore(e, CtxError); /* not a system tool: the call itself says why it fails */
    }
    names.set(wire, real);
    specs.push({ name: wire, description, parameters });
  }
  return { specs, names };
}
