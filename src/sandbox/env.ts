/** The sandbox environment: built from empty with exactly the seed's allowlist (+PATH for shells). */

/** The variables a sandboxed process may receive, in the seed's order. */
export const ALLOWLIST = [
  "CTX_ROOT",
  "CTX_HOME",
  "CTX_AGENT",
  "CTX_AGENT_SUBJECT",
  "CTX_PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
] as const;

/** Shells need a PATH; it names only system directories inside the sandbox, never the host's. */
export const SHELL_PATH = "/usr/bin:/bin";

/** Every name tsh may read: the allowlist plus PATH (this is tsh's `--allow-env`). */
export const TSH_ENV = [...ALLOWLIST, "PATH"] as const;

/** What an agent view contributes to its environment. */
export interface EnvView {
  /** Agent name. */
  agent: string;
  /** Policy subject (the label's type, e.g. `coder_t`). */
  subject: string;
  /** Agent uid (CTX_HOME is `/ctx/home/<uid>`). */
  uid: number;
  /** Tool directories inside the sandbox, left to right. */
  ctxPath: string[];
  /** Login name shown to tools; default `agent`. */
  user?: string;
  /** Terminal type; default `xterm-256color`. */
  term?: string;
  /** Locale; default `C.UTF-8`. */
  lang?: string;
}

/** The sandbox environment of an agent view: exactly ALLOWLIST plus PATH, nothing from the host. */
export function agentEnv(view: EnvView): Record<string, string> {
  const user = view.user ?? "agent";
  return {
    CTX_ROOT: "/ctx",
    CTX_HOME: `/ctx/home/${view.uid}`,
    CTX_AGENT: view.agent,
    CTX_AGENT_SUBJECT: view.subject,
    CTX_PATH: view.ctxPath.join(":"),
    HOME: "/home/agent",
    USER: user,
    LOGNAME: user,
    SHELL: "/bin/bash",
    TERM: view.term ?? "xterm-256color",
    LANG: view.lang ?? "C.UTF-8",
    PATH: SHELL_PATH,
  };
}

/** Keeps only allowlisted names (and PATH) from `env`: how tsh builds a tool's environment. */
export function pickAllowed(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of TSH_ENV) {
    const v = env[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
