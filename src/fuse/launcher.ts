import { ignore } from "../abi/errno.ts";
/** The `bin/` launchers of /ctx: tiny sh scripts that start the binaries of this install. */

/** The binaries `/ctx/bin` may project (only those this checkout can start are shown). */
export const BINARIES = ["ctx", "tsh", "ctxterm", "cortexfsd"] as const;

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/** Options for {@link launchers}. */
export interface LauncherOptions {
  /**
   * The daemon runs from the built single file (packaging/build.ts): launchers exec `exe NAME`
   * for each of the `programs` it carries; the checkout is not looked at.
   */
  built?: { exe: string; programs: readonly string[] };
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
  options: LauncherOptions = {},
): Record<string, string> {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const out: Record<string, string> = {};
  if (options.built) {
    // No checkout: every program is the one built file, called by its program name.
    for (const name of BINARIES) {
      if (options.built.programs.includes(name)) {
        out[name] = `#!/bin/sh\nexec ${q(options.built.exe)} ${name} "$@"\n`;
      }
    }
    return out;
  }
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
