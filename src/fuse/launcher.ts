/** The `bin/` launchers of /ctx: tiny sh scripts that start the four binaries of this install. */

/** The four binaries `/ctx/bin` projects. */
export const BINARIES = ["ctx", "tsh", "ctxterm", "cortexfsd"] as const;

/**
 * Launcher text per binary: the compiled `dist/bin/<name>` when the checkout has one, otherwise
 * the pinned Deno running `cli/<name>.ts` with that binary's permission flags.
 */
export function launchers(
  checkout: string,
  permissions: Record<string, readonly string[]>,
): Record<string, string> {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const out: Record<string, string> = {};
  for (const name of BINARIES) {
    let compiled = false;
    try {
      compiled = Deno.statSync(`${checkout}/dist/bin/${name}`).isFile;
    } catch { /* not built */ }
    const flags = (permissions[name] ?? []).map(q).join(" ");
    out[name] = compiled
      ? `#!/bin/sh\nexec ${q(`${checkout}/dist/bin/${name}`)} "$@"\n`
      : `#!/bin/sh\nexec ${q(`${checkout}/tools/deno`)} run -q ${flags} ${
        q(`${checkout}/cli/${name}.ts`)
      } "$@"\n`;
  }
  return out;
}
