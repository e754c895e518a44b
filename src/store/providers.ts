/** The host's provider configuration (`/etc/cortexfs/providers.d/*.json`), read once per process: limits and base URLs above the built-in catalog. */
import { parseProvider, type ProviderConfig } from "../abi/providers.ts";
import { toCtxError } from "../abi/errno.ts";

/** Where the host's provider files live unless `CORTEXFS_PROVIDERS` names another directory. */
export const DEFAULT_PROVIDERS = "/etc/cortexfs/providers.d";

/** What one process read from the providers directory: the valid files, and why the others were ignored. */
export interface HostConfig {
  /** The directory read. */
  dir: string;
  /** Valid provider files by provider name (disabled ones included, `enabled: false`). */
  providers: Record<string, ProviderConfig>;
  /** One line per file (or the directory) that was ignored, saying why. */
  errors: string[];
}

/** The providers directory of a process environment: `CORTEXFS_PROVIDERS`, else {@link DEFAULT_PROVIDERS}. */
export function providersDir(env: { get(key: string): string | undefined }): string {
  return env.get("CORTEXFS_PROVIDERS") || DEFAULT_PROVIDERS;
}

/**
 * Reads every `*.json` file of `dir` (other names are not provider files and are skipped), in
 * name order. A file that does not parse, is not a regular file or cannot be read is ignored as a
 * whole and named in `errors`; the others still count. A missing directory is no configuration
 * (no error).
 */
export function readHostConfig(dir: string): HostConfig {
  const out: HostConfig = { dir, providers: {}, errors: [] };
  let names: string[];
  try {
    names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      out.errors.push(`${dir}: cannot be read (${toCtxError(e).message}); no provider file used`);
    }
    return out;
  }
  for (const name of names) {
    if (!name.endsWith(".json")) continue;
    const path = `${dir}/${name}`;
    try {
      if (!Deno.statSync(path).isFile) {
        out.errors.push(`${path} ignored: not a regular file`);
        continue;
      }
      const p = parseProvider(Deno.readTextFileSync(path), name);
      out.providers[p.name] = p;
    } catch (e) {
      out.errors.push(`${path} ignored: ${toCtxError(e).message}`);
    }
  }
  return out;
}

let current: HostConfig | undefined;

/**
 * This process's host configuration: read from {@link providersDir} on first use (its errors
 * logged then, once, through `log`; default stderr) and kept for the process's life: no watcher, no reload; a restart is the
 * refresh boundary (seed "CortexFS Architecture").
 */
export function hostConfig(
  options: { log?: (line: string) => void } = {},
): HostConfig {
  if (current === undefined) {
    current = readHostConfig(providersDir(Deno.env));
    const log = options.log ?? ((l: string) => console.error(`cortexfs: ${l}`));
    for (const e of current.errors) log(e);
  }
  return current;
}

/** Makes `config` this process's host configuration (the daemon hands its own to the mount's worker). */
export function useHostConfig(config: HostConfig): void {
  current = config;
}

/** The host-configured limit of native model `id` of `provider` (enabled files only), or undefined. */
export function hostLimit(provider: string, id: string): number | undefined {
  const p = hostConfig().providers[provider];
  return p?.enabled && Object.hasOwn(p.limits, id) ? p.limits[id] : undefined;
}

/** The host-configured base URL of `provider` (enabled files only), or undefined. */
export function hostBaseURL(provider: string): string | undefined {
  const p = hostConfig().providers[provider];
  return p?.enabled ? p.base_url : undefined;
}
