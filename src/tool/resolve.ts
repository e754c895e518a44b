/** Tool lookup through CTX_PATH only: the first executable regular file, left to right, never host PATH. */
import { nameFault } from "../abi/names.ts";

/** Where a CTX_PATH hit lives. */
export interface ToolHit {
  /** The tool's path as the view names it (e.g. `/ctx/tool/fs.read`). */
  path: string;
  /** The same file on this side of the sandbox (host path, or the view path inside). */
  host: string;
  /** Its control directory beside it (`<host>.d`). */
  dir: string;
}

/** The default CTX_PATH of a uid: system tools, then the user's own. */
export function defaultCtxPath(uid: number): string[] {
  return ["/ctx/tool", `/ctx/home/${uid}/tool`];
}

/**
 * Maps a view path under `/ctx` onto `root` (the host path of the tree; `/ctx` inside the
 * sandbox). Anything outside `/ctx` is not a tool directory of the tree and maps to null, so a
 * CTX_PATH naming `/usr/bin` can never reach host programs.
 */
export function mapView(root: string, p: string): string | null {
  if (!p.startsWith("/") || p.split("/").includes("..")) return null;
  if (p === "/ctx") return root;
  if (p.startsWith("/ctx/")) return root.replace(/\/$/, "") + p.slice(4);
  return null;
}

/** Splits a CTX_PATH value; empty entries are dropped. */
export function splitCtxPath(value: string): string[] {
  return value.split(":").filter((s) => s !== "");
}

/** True when a stat result is a regular file with any execute bit. */
function executable(st: Deno.FileInfo): boolean {
  return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
}

/**
 * Resolves `name` through `ctxPath` on `root`: the first entry whose `<dir>/<name>` is an
 * executable regular file (a symlink counts by its target here; the nofollow open refuses it
 * later, so a symlinked tool is refused rather than silently skipped). Null when not found.
 */
export function resolveTool(
  name: string,
  options: { root: string; ctxPath: string[] },
): ToolHit | null {
  if (nameFault(name, "tool") !== undefined) return null;
  for (const dir of options.ctxPath) {
    const hostDir = mapView(options.root, dir);
    if (hostDir === null) continue;
    const host = `${hostDir}/${name}`;
    try {
      if (!executable(Deno.statSync(host))) continue;
    } catch {
      continue;
    }
    return { path: `${dir.replace(/\/$/, "")}/${name}`, host, dir: `${host}.d` };
  }
  return null;
}

/** Parses `.tshrc`: data only, `CTX_PATH=...` lines, `#` comments and blank lines; never executed. */
export function parseTshrc(text: string): string[] | null {
  let found: string[] | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("CTX_PATH=")) found = splitCtxPath(line.slice("CTX_PATH=".length));
    // Anything else (including `export`) is ignored: the file is not shell syntax.
  }
  return found;
}

/**
 * The CTX_PATH tsh uses. Inside an agent view (CTX_AGENT set) the runtime's CTX_PATH wins;
 * a standalone session reads `CTX_HOME/.tshrc`, then the inherited CTX_PATH, then the default.
 */
export function ctxPathFor(
  env: Record<string, string | undefined>,
  options: { tshrc?: string | null; uid: number },
): string[] {
  if (env.CTX_AGENT && env.CTX_PATH !== undefined) return splitCtxPath(env.CTX_PATH);
  const rc = options.tshrc ? parseTshrc(options.tshrc) : null;
  if (rc) return rc;
  if (env.CTX_PATH !== undefined) return splitCtxPath(env.CTX_PATH);
  return defaultCtxPath(options.uid);
}
