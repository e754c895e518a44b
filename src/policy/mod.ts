/** The public face of src/policy: policy v0 evaluation, the perm ceiling and the pure authority decision. */
export {
  type AgentControls,
  type AllowedTool,
  decide,
  type Facts,
  type Hit,
  networkAllowed,
  type Request,
  type Verdict,
} from "./authorize.ts";
export { allows, type Ask, ruleText } from "./rules.ts";
export { checkMounts } from "./mount.ts";
export { type Letter, letterOf, SHELL_TOOLS } from "./perm.ts";
