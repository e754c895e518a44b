/** Fallback candidates of a run: the agent's model, then its `fallback` chain, each resolved and checked against the agent's window. */
import { type CtxError, toCtxError } from "../abi/errno.ts";
import { effectiveTokens, type Window } from "../abi/window.ts";
import { loadModel, type ModelDef } from "../store/agent.ts";
import type { Driver, ModelConfig } from "./driver.ts";
import { modelFor } from "./mod.ts";

/** One model a run may use: the agent's model, then its `fallback` chain. */
export interface Candidate {
  ref: string;
  driver?: Driver;
  config?: ModelConfig;
  /** Effective window for this candidate (undefined: unknown). */
  window?: number;
  /** Why this candidate cannot be used at all (missing, no driver, window ineligible). */
  fault?: CtxError;
}

/**
 * The candidates of a run: the agent's model, then each `fallback` of it, in order. Each is
 * resolved and checked against the agent's `window` (an explicit window needs a known limit at
 * least as large: seed "Context Window Control"); a candidate that fails keeps its error.
 * `modelDef`: the agent's model as the request already loaded it (read once per request).
 */
export function candidatesOf(
  root: string,
  agent: { model: string; windowSetting: Window; modelDef?: ModelDef },
): Candidate[] {
  const one = (ref: string, def?: ModelDef): Candidate => {
    try {
      def ??= loadModel(root, ref);
      const { driver, config } = modelFor(def);
      return {
        ref: def.ref,
        driver,
        config,
        window: effectiveTokens(agent.windowSetting, def.limit, def.ref),
      };
    } catch (e) {
      return { ref, fault: toCtxError(e) };
    }
  };
  let def = agent.modelDef;
  try {
    def ??= loadModel(root, agent.model);
  } catch (e) {
    return [{ ref: agent.model, fault: toCtxError(e) }]; // no chain without the model
  }
  const out = [one(agent.model, def)];
  for (const ref of def.fallback) if (!out.some((c) => c.ref === ref)) out.push(one(ref));
  return out;
}
