/** The one bridge from the mount to the storage tree's control rules (src/store/control.ts). */
import { controlSpec } from "../abi/controls.ts";
import { parseOwner } from "../abi/identity.ts";
import { checkControl, classify, type ControlRef, writeControl } from "../store/control.ts";

export { checkControl, writeControl };

/** Which control `abiPath` names (agent, model, tool, or a user-tier object in home/<uid>/), or null. */
export function controlPath(abiPath: string): ControlRef | null {
  return classify(abiPath);
}

/** The control directory of a control path: `<base>/<object>.d`. */
function dirOf(ref: ControlRef): string {
  return `${ref.base}/${ref.object}.d`;
}

/**
 * The uid that owns the object of a control path: `agent/<n>.d/owner` for agents, `<u>` for
 * objects under `home/<u>/`, root for system models and tools (and for a broken owner file).
 */
export function objectOwner(root: string, abiPath: string): number {
  const ref = classify(abiPath);
  if (!ref) return 0;
  const m = ref.base.match(/^home\/([0-9]+)\//);
  if (m) return Number(m[1]);
  if (ref.kind !== "agent") return 0;
  try {
    return parseOwner(Deno.readTextFileSync(`${root}/${dirOf(ref)}/owner`));
  } catch {
    return 0; // missing or broken: only root may change the agent
  }
}

/** Whether a control path may be written: "control", "readonly" (EROFS) or "unknown" (EINVAL). */
export function controlKind(abiPath: string): "control" | "readonly" | "unknown" {
  const ref = classify(abiPath);
  if (!ref) return "unknown";
  try {
    return controlSpec(ref.kind, ref.control).writable ? "control" : "readonly";
  } catch {
    return "unknown";
  }
}
