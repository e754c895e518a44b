/** Model objects seen by the runtime: resolve a model's controls and pick the driver its `driver` names. */
import { type Driver as Route, routeFor } from "../abi/model.ts";
import { MODEL_CONTROLS } from "../abi/controls.ts";
import type { Effort } from "../abi/choice.ts";
import { CtxError } from "../abi/errno.ts";
import { readControl, resolveModel } from "../store/agent.ts";
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
 * The driver and configuration of model `ref` for an agent-owned call: the `agent` route key
 * first, then `default`; the first adapter this build has wins. ENOENT for a missing model or
 * driver control, ENOTSUP when no listed driver is built in, EINVAL for a bad control.
 */
export function modelFor(root: string, ref: string): ResolvedModel {
  let real: string;
  try {
    real = resolveModel(root, ref);
  } catch {
    throw new CtxError("ENOENT", `model ${JSON.stringify(ref)} does not exist`, {
      path: `model/${ref}`,
    });
  }
  const dir = `${root}/model/${real}.d`;
  const route = readControl<Route>(dir, "driver", MODEL_CONTROLS.driver);
  if (route === undefined) {
    throw new CtxError("ENOENT", `model ${JSON.stringify(ref)} has no driver control`);
  }
  const [provider, name] = real.split("/");
  const effort = readControl<Effort>(dir, "effort", MODEL_CONTROLS.effort) ?? "auto";
  const config: ModelConfig = {
    ref: real,
    provider,
    id: readControl<string>(dir, "id", MODEL_CONTROLS.id) ?? name,
    defaults: readControl<Record<string, string>>(dir, "default", MODEL_CONTROLS.default) ?? {},
    ...(effort !== "auto" ? { effort } : {}),
  };
  const names = routeFor(route, "agent");
  for (const n of names) if (Object.hasOwn(DRIVERS, n)) return { driver: DRIVERS[n], config };
  throw new CtxError("ENOTSUP", `no driver of ${JSON.stringify(names)} is built in`, {
    path: `model/${real}.d/driver`,
  });
}

/** The driver of model `ref` (see {@link modelFor}). */
export function driverFor(root: string, ref: string): Driver {
  return modelFor(root, ref).driver;
}
