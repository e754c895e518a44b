/** The `bin/` launchers of /ctx: tiny sh scripts that start the binaries of this install. */

/** The binaries `/ctx/bin` may project (only those this checkout can start are shown). */
export const BINARIES = ["ctx", "tsh", "ctxterm", "cortexfsd"] as const;

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Launcher text per binary: the compiled `dist/bin/<name>` when the checkout has one, otherwise
 * the pinned Deno running `cli/<name>.ts` with that binary's permission flags. A binary with
 * neither is left out: a launcher that can only fail ("Module not found") would be a lie in
 * `ls /ctx/bin`.
 */
export function launchers(
  checkout: string,
  permissions: Record<string, readonly string[]>,
): Record<string, string> {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const out: Record<string, string> = {};
  for (const name of BINARIES) {
    const compiled = `${checkout}/dist/bin/${name}`;
    const entry = `${checkout}/cli/${name}.ts`;
    if (isFile(compiled)) {
      out[name] = `#!/bin/sh\nexec ${q(compiled)} "$@"\n`;
    } else if (isFile(entry)) {
      const flags = (permissions[name] ?? []).map(q).join(" ");
      out[name] = `#!/bin/sh\nexec ${q(`${checkout}/tools/deno`)} run -q ${flags} ${
        q(entry)
      } "$@"\n`;
    }
  }
  return out;
}
