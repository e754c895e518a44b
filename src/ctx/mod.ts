/** The `ctx` command implementations (cli/ctx.ts wires them to commander). */
export {
  abiPath,
  deadMount,
  findTree,
  hostPath,
  NoTreeError,
  START_HINT,
  treeRoot,
} from "./root.ts";
export type { FoundTree, RootVia } from "./root.ts";
export { errorLine, guarded } from "./fail.ts";
export { cat, ls, set, why } from "./files.ts";
export { status } from "./status.ts";
export { reportLines, storageUpdate } from "./storage.ts";
export type { StorageUpdateArgs } from "./storage.ts";
export { addAgentCommands, agentContext, TERMINAL_HELP } from "./agent.ts";
export type { AgentContext, AgentExtension } from "./agent.ts";
