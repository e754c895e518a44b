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
  /** Reads the whole of stdin. */
  stdin: () => Promise<Uint8Array>;
}

/** Writes the key; returns the line printed (the path, never the key). */
export async function providerSet(a: ProviderSetArgs): Promise<string> {
  let key: string;
  if (a.envVar !== undefined) {
    const v = a.env[a.envVar];
    if (v === undefined || v === "") {
      throw new CtxError("ENOENT", `environment variable ${JSON.stringify(a.envVar)} is not set`);
    }
    key = v;
  } else key = new TextDecoder().decode(await a.stdin());
  const root = secretsRoot({ get: (k) => a.env[k] });
  const path = writeSecret(a.name, a.slot ?? "default", { key, root });
  return `stored ${path}`;
}
