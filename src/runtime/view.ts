/** The runtime's view of an agent definition, re-read from the tree on every request (H1's loadAgent). */
import { toCtxError } from "../abi/errno.ts";
import { type AgentDef, effectiveWindow, loadAgent, loadModel } from "../store/agent.ts";

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
  > {
  /** Host path of the executable entry `agent/<name>`. */
  entry: string;
  /** True when the entry is a program (sdk-envelope-v1); false for host-driven (model-backed). */
  exec: boolean;
  /** Effective window in tokens, undefined when unknown. */
  window?: number;
}

const RUNNER = "#!/usr/bin/cortexfs-object-runner";

function head(path: string): string {
  try {
    const f = Deno.openSync(path, { read: true });
    try {
      const buf = new Uint8Array(RUNNER.length);
      const n = f.readSync(buf) ?? 0;
      return new TextDecoder().decode(buf.subarray(0, n));
    } finally {
      f.close();
    }
  } catch (e) {
    throw toCtxError(e, path);
  }
}

/** Reads an agent fresh from the tree (ENOENT when absent, EINVAL for a bad control). */
export function readAgent(root: string, name: string): AgentView {
  const def = loadAgent(root, name);
  const entry = `${root}/agent/${def.name}`;
  let window: number | undefined;
  try {
    window = effectiveWindow(def, loadModel(root, def.model));
  } catch {
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
    entry,
    exec: head(entry) !== RUNNER,
    window,
  };
}
