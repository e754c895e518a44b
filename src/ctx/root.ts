/** The tree `ctx` works on (CTX_ROOT or --root) and ABI path arguments relative to it. */
import { CtxError } from "../abi/errno.ts";

/** The tree root: `--root` wins, then CTX_ROOT, then `/ctx`. */
export function treeRoot(
  options: { root?: string; env: Record<string, string | undefined> },
): string {
  const r = options.root ?? options.env.CTX_ROOT ?? "/ctx";
  return r.length > 1 ? r.replace(/\/+$/, "") : r;
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
