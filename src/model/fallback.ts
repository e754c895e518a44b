/** Fallback candidates of a run: the agent's model, then its `fallback` chain, each resolved and checked against the agent's window. */
import { type CtxError, toCtxError } from "../abi/errno.ts";
import { effectiveTokens, type Window } from "../abi/window.ts";
import { loadModel } from "../store/agent.ts";
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
 */
export function candidatesOf(
  root: string,
  agent: { model: string; windowSetting: Window },
): Candidate[] {
  const out: Candidate[] = [];
  const one = (ref: string): Candidate => {
    try {
      const def = loadModel(root, ref);
      const { driver, config } = modelFor(root, ref);
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
  const first = one(agent.model);
  out.push(first);
  let chain: string[] = [];
  try {
    chain = loadModel(root, agent.model).fallback;
  } catch { /* the first candidate's fault says why */ }
  for (const ref of chain) if (!out.some((c) => c.ref === ref)) out.push(one(ref));
  return out;
}
