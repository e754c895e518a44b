/** Where state lives: the defaults of DESIGN.md, each overridable by environment or flag. */

/** The resolved locations of one CortexFS host. */
export interface Paths {
  /** Storage root holding `generations/<g>/` and the `current` symlink. */
  storage: string;
  /** Mount point of `/ctx`. */
  mount: string;
  /** Directory of live sockets. */
  run: string;
  /** Provider secrets. */
  secrets: string;
  /** Provider configuration. */
  etc: string;
}

/** Options for {@link resolvePaths}. */
export interface PathOptions {
  /** Development mode: everything under `<dir>/.dev/` of the checkout. */
  dev?: string;
  /** The environment to read overrides from (tests pass their own; default: an empty map). */
  env?: Record<string, string | undefined>;
}

/** Resolves the host's paths: explicit env overrides win, then dev mode, then the packaged defaults. */
export function resolvePaths(options: PathOptions = {}): Paths {
  const env = options.env ?? {};
  const base = options.dev ? `${options.dev}/.dev` : undefined;
  return {
    storage: env.CORTEXFS_STORAGE ?? (base ? `${base}/storage` : "/var/lib/cortexfs/storage"),
    mount: env.CTX_ROOT ?? (base ? `${base}/ctx` : "/ctx"),
    run: env.CORTEXFS_RUN ?? (base ? `${base}/run` : "/run/cortexfs"),
    secrets: env.CORTEXFS_SECRETS ?? (base ? `${base}/secrets` : "/var/lib/cortexfs/secrets"),
    etc: env.CORTEXFS_ETC ?? (base ? `${base}/etc` : "/etc/cortexfs"),
  };
}
