/** The runtime's view of an agent definition, re-read from the tree on every request (H1's loadAgent). */
import { CtxError, ignore } from "../abi/errno.ts";
import {
  type AgentDef,
  effectiveWindow,
  loadAgent,
  loadModel,
  type ModelDef,
} from "../store/agent.ts";
import { readRegular } from "../store/regular.ts";

/** What the runtime needs from `agent/<name>` and `agent/<name>.d/`. */
export interface AgentView extends
  Pick<
    AgentDef,
    | "name"
    | "owner"
    | "uid"
    | "gid"
    | "groups"
    | "env"
    | "model"
    | "abi"
    | "approval"
    | "tools"
    | "cwd"
    | "system"
    | "template"
  > {
  /** Host path of the executable entry `agent/<name>`. */
  entry: string;
  /** True when the entry is a program (sdk-envelope-v1); false for host-driven (model-backed). */
  exec: boolean;
  /** Effective window in tokens, undefined when unknown. */
  window?: number;
  /** The `window` setting itself (each fallback candidate is checked against it). */
  windowSetting: AgentDef["window"];
  /** The agent's model as this request read it (undefined: missing or broken; the run says why). */
  modelDef?: ModelDef;
}

const RUNNER = "#!/usr/bin/cortexfs-object-runner";

// A regular file only (src/store/regular.ts): a FIFO planted as an entry must not stall a request.
function head(path: string): string {
  const bytes = readRegular(path, { max: RUNNER.length });
  if (!bytes) throw new CtxError("ENOENT", "the agent entry is missing", { path });
  return new TextDecoder().decode(bytes);
}

/** Reads an agent fresh from the tree (ENOENT when absent, EINVAL for a bad control). */
export function readAgent(root: string, name: string): AgentView {
  const def = loadAgent(root, name);
  const entry = `${root}/agent/${def.name}`;
  let window: number | undefined;
  let modelDef: ModelDef | undefined;
  try {
    modelDef = loadModel(root, def.model);
    window = effectiveWindow(def, modelDef);
  } catch (e) {
    ignore(e, "ENOENT", "EINVAL");
    window = undefined; // a missing model surfaces when the run needs it, not at connect time
  }
  return {
    name: def.name,
    owner: def.owner,
    uid: def.uid,
    gid: def.gid,
    groups: def.groups,
    env: def.env,
    model: def.model,
    abi: def.abi,
    approval: def.approval,
    tools: def.tools,
    cwd: def.cwd,
    system: def.system,
    template: def.template,
    windowSetting: def.window,
    entry,
    exec: head(entry) !== RUNNER,
    window,
    modelDef,
  };
}
