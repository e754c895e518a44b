/** The public face of src/sandbox: the bwrap profile, the environment allowlist, launch with receipts, doctor. */
export { agentEnv, ALLOWLIST, type EnvView, pickAllowed, SHELL_PATH, TSH_ENV } from "./env.ts";
export {
  type Bind,
  type HostLayout,
  hostLayout,
  type Profile,
  profile,
  type ProfileOptions,
  type SandboxSpec,
} from "./profile.ts";
export { launch, launchArgv, type LaunchOptions, type LaunchResult } from "./launch.ts";
export { bootId, type Receipt, receiptLive, startTime } from "./receipt.ts";
export { type WorkspaceGit, workspaceGit } from "./workspace.ts";
export { doctor, type DoctorReport, requireSandbox } from "./doctor.ts";
