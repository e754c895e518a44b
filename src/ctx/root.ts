/** The tree `ctx` works on (--root, CTX_ROOT, or the first live mount found) and ABI paths in it. */
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";

/** How a tree is started, for the messages that say what to do. */
export const START_HINT =
  "start it with `sudo cortexfsd` (in a checkout: `sudo tools/deno task dev`)";

/** The tree root as named: `--root` wins, then CTX_ROOT, then `/ctx` (no lookup). */
export function treeRoot(
  options: { root?: string; env: Record<string, string | undefined> },
): string {
  const r = options.root ?? options.env.CTX_ROOT ?? "/ctx";
  return trim(r);
}

function trim(r: string): string {
  return r.length > 1 ? r.replace(/\/+$/, "") : r;
}

/** Why `ctx` uses the tree it uses: named by `--root` or CTX_ROOT, the system mount, a dev mount. */
export type RootVia = "--root" | "CTX_ROOT" | "/ctx" | "dev";

/** A tree found by {@link findTree}. */
export interface FoundTree {
  root: string;
  via: RootVia;
}

/**
 * No tree anywhere `ctx` looked. Printed as `ctx: no CortexFS mount found (tried ...): start it
 * with ...` (no errno/path prefix: it is about no single path); exit 69, unavailable.
 */
export class NoTreeError extends CtxError {
  readonly tried: string[];
  constructor(tried: string[]) {
    super(
      "ENXIO",
      `no CortexFS mount found (tried ${tried.join(", ")}): ${START_HINT}, ` +
        "or point CTX_ROOT at a tree",
    );
    this.name = "NoTreeError";
    this.tried = tried;
  }
}

/** The error for a mount whose daemon died (every access answers ENOTCONN). */
export function deadMount(dir: string): CtxError {
  return new CtxError(
    "ENOTCONN",
    `the CortexFS mount is dead (its daemon is gone): ${START_HINT} again; ` +
      "it clears the dead mount first",
    { path: dir },
  );
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.PermissionDenied);
    return false;
  }
}

/** True when `dir` holds a tree (its `status` file); a dead mount throws {@link deadMount}. */
function isTree(dir: string): boolean {
  try {
    Deno.statSync(`${dir}/status`);
    return true;
  } catch (e) {
    const errno = toCtxError(e).errno;
    if (errno === "ENOTCONN") throw deadMount(dir);
    if (errno === "ENOENT" || errno === "ENOTDIR") return false;
    // There but not ours to stat (EACCES): the command itself says why. Anything else is not a tree.
    return errno === "EACCES";
  }
}

/**
 * The first place {@link findTree} looks, unchecked (`--root`, else CTX_ROOT, else `/ctx`): a
 * command that reaches the tree through one socket tries it first and runs findTree (which words
 * every failure) only when that fails.
 */
export function firstPlace(options: {
  root?: string;
  env: Record<string, string | undefined>;
  system?: string;
}): string {
  return trim(options.root ?? options.env.CTX_ROOT ?? options.system ?? "/ctx");
}

/**
 * The tree to work on: `--root`, else CTX_ROOT (either must hold a tree), else the first of
 * `/ctx` and the checkout's dev mount (`<checkout>/.dev/ctx`) that holds one. Throws
 * {@link NoTreeError} when none does, the dead-mount error when the one named or found is dead.
 */
export function findTree(options: {
  root?: string;
  env: Record<string, string | undefined>;
  /** The checkout `ctx` runs from (its dev mount is the last place looked, if it has deno.json). */
  checkout?: string;
  /** The system mount point (default `/ctx`). */
  system?: string;
}): FoundTree {
  const named = options.root !== undefined
    ? { root: trim(options.root), via: "--root" as const }
    : options.env.CTX_ROOT !== undefined
    ? { root: trim(options.env.CTX_ROOT), via: "CTX_ROOT" as const }
    : undefined;
  if (named) {
    if (isTree(named.root)) return named;
    throw new NoTreeError([`${named.root} (${named.via})`]);
  }
  const places: FoundTree[] = [{ root: options.system ?? "/ctx", via: "/ctx" }];
  // Only a real checkout (its deno.json beside cli/) has a dev mount; an installed or compiled
  // ctx has none to look for.
  if (options.checkout && exists(`${options.checkout}/deno.json`)) {
    places.push({ root: `${options.checkout}/.dev/ctx`, via: "dev" });
  }
  for (const p of places) if (isTree(p.root)) return p;
  throw new NoTreeError(places.map((p) => p.root));
}

/**
 * Normalizes a PATH argument to an ABI path relative to the root (`""` is the root itself).
 * Accepted: `agent/coder.d/window`, `/ctx/agent/coder.d/window`, or an absolute path below `root`.
 */
export function abiPath(arg: string, root: string): string {
  let p = arg;
  if (p === "/ctx" || p === root) p = "";
  else if (p.startsWith("/ctx/")) p = p.slice(5);
  else if (p.startsWith(`${root}/`)) p = p.slice(root.length + 1);
  else if (p.startsWith("/")) {
    throw new CtxError("EINVAL", `absolute path is not below /ctx or CTX_ROOT (${root})`, {
      path: arg,
    });
  }
  const parts = p.split("/").filter((s) => s !== "" && s !== ".");
  if (parts.includes("..")) {
    throw new CtxError("EINVAL", `".." is not allowed in an ABI path`, { path: arg });
  }
  return parts.join("/");
}

/** The host path of an ABI path under `root`. */
export function hostPath(root: string, rel: string): string {
  return rel === "" ? root : `${root}/${rel}`;
}
