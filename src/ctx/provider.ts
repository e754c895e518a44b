/** `ctx provider set NAME`: stores a provider API key on the host, from stdin or a named env var, never argv. */
import { CtxError } from "../abi/errno.ts";
import { secretsRoot, writeSecret } from "../model/secret.ts";

/** Inputs of `ctx provider set`. */
export interface ProviderSetArgs {
  name: string;
  slot?: string;
  /** Name of an environment variable holding the key (its value is never printed). */
  envVar?: string;
  env: Record<string, string>;
  /** The store's root (dev mode: the checkout's `.dev/secrets`); default: CORTEXFS_SECRETS or the host's. */
  root?: string;
  /** Reads the whole of stdin. */
  stdin: () => Promise<Uint8Array>;
}

/** Writes the key; returns the line printed (the path, never the key). */
export async function providerSet(a: ProviderSetArgs): Promise<string> {
  const root = a.root ?? secretsRoot({ get: (k) => a.env[k] });
  // Before stdin is read: the store is root's (0711 levels, 0600 keys) wherever it is.
  if (Deno.uid() !== 0) {
    const from = a.envVar === undefined ? " < keyfile" : ` --env ${a.envVar}`;
    throw new CtxError(
      "EACCES",
      `storing a provider key needs root (keys live in ${root}, readable by root only): ` +
        `run \`sudo ctx provider set ${a.name}${
          a.slot && a.slot !== "default" ? ` --slot ${a.slot}` : ""
        }${from}\``,
    );
  }
  let key: string;
  if (a.envVar !== undefined) {
    const v = a.env[a.envVar];
    if (v === undefined || v === "") {
      throw new CtxError("ENOENT", `environment variable ${JSON.stringify(a.envVar)} is not set`);
    }
    key = v;
  } else key = new TextDecoder().decode(await a.stdin());
  const path = writeSecret(a.name, a.slot ?? "default", { key, root });
  return `stored ${path}`;
}
