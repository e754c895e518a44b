/** `ctx ls`, `ctx cat`, `ctx set`: plain file access to the tree, control writes validated. */
import { CtxError, ERRNO, toCtxError } from "../abi/errno.ts";
import { abiPath, hostPath } from "./root.ts";

const PLAIN: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  ENOTDIR: "not a directory",
  EISDIR: "is a directory",
};

/** A filesystem error as a CtxError with a short message (the host path stays out of it). */
function fsError(e: unknown, rel: string): CtxError {
  const err = toCtxError(e, rel || "/");
  if (e instanceof CtxError) return err;
  return new CtxError(err.errno, PLAIN[err.errno] ?? err.message, { path: rel || "/", cause: e });
}

/** `ctx ls [PATH]`: the entries of a directory, sorted, one per line (readdir only). */
export function ls(root: string, arg = ""): string[] {
  const rel = abiPath(arg, root);
  const dir = hostPath(root, rel);
  try {
    return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch (e) {
    throw fsError(e, rel);
  }
}

/** `ctx cat PATH`: the file's bytes, unchanged. */
export function cat(root: string, arg: string): Uint8Array {
  const rel = abiPath(arg, root);
  try {
    return Deno.readFileSync(hostPath(root, rel));
  } catch (e) {
    throw fsError(e, rel);
  }
}

/** `status`, `bin/*`, object entries and socket aliases: projections no write reaches. */
function readOnlyProjection(rel: string): boolean {
  return rel === "status" || rel === "bin" || rel.startsWith("bin/") ||
    /^(agent|tool)\/[^/]+$/.test(rel) || /^model\/[^/]+\/[^/]+$/.test(rel);
}

/**
 * `ctx set PATH VALUE`: validated atomic replace of one control. A one-value control gets its final
 * newline when VALUE lacks it; list controls take VALUE as given (`-` reads VALUE from stdin).
 */
export async function set(
  root: string,
  args: { path: string; value: string; stdin?: () => Promise<Uint8Array> },
): Promise<void> {
  const rel = abiPath(args.path, root);
  const { classify, writeControl } = await import("../store/control.ts");
  const { AGENT_CONTROLS, MODEL_CONTROLS, TOOL_CONTROLS } = await import("../abi/controls.ts");
  const ref = classify(rel);
  if (!ref) {
    // The same answer the mount gives for these paths: read-only projections are EROFS.
    if (readOnlyProjection(rel)) {
      throw new CtxError("EROFS", "read-only projection (not a control)", { path: rel });
    }
    throw new CtxError(
      "EINVAL",
      "not a control file (ctx set writes agent, model and tool controls)",
      { path: rel },
    );
  }
  const table = ref.kind === "agent"
    ? AGENT_CONTROLS
    : ref.kind === "model"
    ? MODEL_CONTROLS
    : TOOL_CONTROLS;
  let bytes: Uint8Array;
  if (args.value === "-" && args.stdin) {
    bytes = await args.stdin();
  } else {
    const single = table[ref.control]?.single ?? false;
    const v = single && !args.value.endsWith("\n") ? `${args.value}\n` : args.value;
    bytes = new TextEncoder().encode(v);
  }
  try {
    writeControl(root, rel, bytes, { uid: Deno.uid() ?? 0 });
  } catch (e) {
    const err = toCtxError(e, rel);
    throw new CtxError(err.errno, err.message, { path: err.path ?? rel, cause: e });
  }
}

/**
 * `ctx why PATH`: why this user's last write of a control through the mount was refused (the
 * mount keeps it in `user.cortexfs.refused`, for the writer only: write(2) carries only the
 * errno), or that none was since the daemon started or since the last accepted write.
 */
export async function why(root: string, arg: string): Promise<string> {
  const rel = abiPath(arg, root);
  const { refusedWhy } = await import("../store/why.ts");
  const r = refusedWhy(hostPath(root, rel));
  if (typeof r === "number") {
    const errno = Object.entries(ERRNO).find(([, v]) => v === -r)?.[0] ?? "EIO";
    throw new CtxError(errno as keyof typeof ERRNO, "cannot read why a write was refused", {
      path: rel,
    });
  }
  if (r === "unsupported") return `${rel}: only the mount keeps why a write was refused\n`;
  if (r === null) {
    return `${rel}: no refused write of yours since the daemon started or your last accepted write\n`;
  }
  return `${rel}: ${r}`;
}
