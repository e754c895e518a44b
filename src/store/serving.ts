/** Which generation a running cortexfsd serves: a shared flock on `<storage>/.serving-<g>`. */
import { CtxError, toCtxError } from "../abi/errno.ts";

/** The lock file of generation `g`. */
export function servingPath(storage: string, g: string): string {
  return `${storage}/.serving-${g}`;
}

/**
 * Marks generation `g` as served for as long as the returned file stays open (the daemon keeps it
 * for its lifetime; the kernel drops the lock when the process ends, however it ends).
 */
export function holdServing(storage: string, g: string): Deno.FsFile {
  const f = Deno.openSync(servingPath(storage, g), {
    read: true,
    write: true,
    create: true,
    mode: 0o600,
  });
  try {
    f.lockSync(false);
  } catch (e) {
    f.close();
    throw toCtxError(e, servingPath(storage, g));
  }
  return f;
}

/**
 * True while some process holds the serving lock of `g`. Asks util-linux `flock -n` for an
 * exclusive lock (Deno has no non-blocking flock and ctx has no FFI); a missing file means no.
 */
export function isServed(storage: string, g: string): boolean {
  const path = servingPath(storage, g);
  try {
    Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw toCtxError(e, path);
  }
  let out: Deno.CommandOutput;
  try {
    out = new Deno.Command("flock", {
      args: ["-n", "-x", path, "true"],
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).outputSync();
  } catch (e) {
    throw new CtxError("ENOTSUP", `cannot run flock(1) (util-linux) to check ${path}: ${e}`);
  }
  return !out.success;
}
