/** Model objects seen by the runtime: pick the driver a model's `driver` control names. */
import { CtxError } from "../abi/errno.ts";
import type { Driver } from "./driver.ts";
import { echoDriver } from "./echo.ts";

export type { ChatMessage, Driver, ModelEvent, ModelRequest } from "./driver.ts";
export { echoDriver } from "./echo.ts";

const DRIVERS: Record<string, Driver> = { debug: echoDriver };

/**
 * The driver for an agent-owned call of model `ref`: the `agent` route key first, then `default`,
 * then a legacy single name. ENOENT for a missing model, ENOTSUP for a driver this build lacks.
 */
export function driverFor(root: string, ref: string): Driver {
  let entry: string;
  try {
    entry = Deno.realPathSync(`${root}/model/${ref}`);
  } catch {
    throw new CtxError("ENOENT", `model ${JSON.stringify(ref)} does not exist`, {
      path: `model/${ref}`,
    });
  }
  let text = "";
  try {
    text = Deno.readTextFileSync(`${entry}.d/driver`);
  } catch {
    throw new CtxError("ENOENT", `model ${JSON.stringify(ref)} has no driver control`);
  }
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  let names: string[];
  if (lines.length === 1 && !lines[0].includes("=")) names = [lines[0]];
  else {
    const table = new Map(lines.map((l) => {
      const i = l.indexOf("=");
      return [l.slice(0, i), l.slice(i + 1).split(",")] as const;
    }));
    names = table.get("agent") ?? table.get("default") ?? [];
  }
  for (const n of names) if (DRIVERS[n]) return DRIVERS[n];
  throw new CtxError("ENOTSUP", `no driver of ${JSON.stringify(names)} is built in`, {
    path: `model/${ref}.d/driver`,
  });
}
