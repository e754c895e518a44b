/** How every `ctx` command reports failure: `ctx: <ERRNO>: <path>: <message>` and the spec's exit code. */
import { CtxError, EXIT, exitCode, toCtxError } from "../abi/errno.ts";
import { NoTreeError } from "./root.ts";

/** The line printed for an error (without the trailing newline). */
export function errorLine(e: CtxError, fallbackPath: string): string {
  // Finding no tree at all is about no one path: `ctx: no CortexFS mount found (tried ...): ...`.
  if (e instanceof NoTreeError) return `ctx: ${e.message}`;
  return `ctx: ${e.errno}: ${e.path ?? fallbackPath}: ${e.message}`;
}

/**
 * Runs a command body and turns a thrown error into stderr + exit code. Expected failures carry
 * an errno (CtxError or an fs error); anything else is a bug: EIO with exit 70 (internal).
 */
export async function guarded(path: string, body: () => unknown | Promise<unknown>): Promise<void> {
  try {
    const code = await body();
    if (typeof code === "number") Deno.exitCode = code;
  } catch (e) {
    const known = e instanceof CtxError || typeof (e as { code?: unknown })?.code === "string" ||
      e instanceof Deno.errors.NotFound || e instanceof Deno.errors.PermissionDenied;
    const err = toCtxError(e, path);
    console.error(errorLine(err, path));
    Deno.exitCode = known ? exitCode(err.errno) : EXIT.internal;
  }
}
