/** Model objects seen by the runtime: resolve a model's controls and pick the driver its `driver` names. */
import { routeFor } from "../abi/model.ts";
import { MODEL_CONTROLS } from "../abi/controls.ts";
import { CtxError } from "../abi/errno.ts";
import { type ModelDef, readControl } from "../store/agent.ts";
import type { Driver, ModelConfig } from "./driver.ts";
import { echoDriver } from "./echo.ts";
import { anthropicMessagesDriver } from "./anthropic.ts";
import { openaiChatDriver } from "./openai.ts";
import { openaiResponsesDriver } from "./responses.ts";
import { scriptDriver } from "./script.ts";

export type {
  CallerContext,
  ChatMessage,
  Driver,
  ModelConfig,
  ModelEvent,
  ModelRequest,
  ModelToolCall,
  StopReason,
  ToolSpec,
} from "./driver.ts";
export { echoDriver } from "./echo.ts";
export { scriptDriver } from "./script.ts";

/** The adapters this build has, by the name a `driver` control uses. */
export const DRIVERS: Readonly<Record<string, Driver>> = {
  debug: echoDriver,
  "debug-script": scriptDriver,
  "openai-chat": openaiChatDriver,
  "openai-responses": openaiResponsesDriver,
  "anthropic-messages": anthropicMessagesDriver,
};

/** A model object resolved for an agent-owned call: its driver and its configuration. */
export interface ResolvedModel {
  driver: Driver;
  config: ModelConfig;
}

/**
 * The driver and configuration of a loaded model (src/store/agent.ts `loadModel`: its controls
 * are read once per request) for an agent-owned call: the `agent` route key first, then
 * `default`; the first adapter this build has wins. Only `default` is read here (EINVAL when
 * bad); ENOTSUP when no listed driver is built in.
 */
export function modelFor(def: ModelDef): ResolvedModel {
  const config: ModelConfig = {
    ref: def.ref,
    provider: def.provider,
    id: def.id,
    defaults: readControl<Record<string, string>>(def.dir, "default", MODEL_CONTROLS.default) ?? {},
    ...(def.effort !== "auto" ? { effort: def.effort } : {}),
  };
  const names = routeFor(def.driver, "agent");
  for (const n of names) if (Object.hasOwn(DRIVERS, n)) return { driver: DRIVERS[n], config };
  throw new CtxError("ENOTSUP", `no driver of ${JSON.stringify(names)} is built in`, {
    path: `model/${def.ref}.d/driver`,
  });
}
