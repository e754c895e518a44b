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
export {
  gate,
  launch,
  launchArgv,
  type LaunchOptions,
  type LaunchResult,
  systemTool,
} from "./launch.ts";
export { bootId, type Receipt, receiptLive, startTime } from "./receipt.ts";
export { dupFd, fdPath, GIT_SEARCH, type GitGuard, gitGuards, openDir } from "./workspace.ts";
export { guardView, type Private, type Source } from "./guard.ts";
export { doctor, type DoctorReport, requireSandbox } from "./doctor.ts";
