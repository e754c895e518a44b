/** Tool lookup through CTX_PATH only: the first executable regular file, left to right, never host PATH. */
import { CtxError, ignore } from "../abi/errno.ts";
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
 * The canonical form of an absolute view path: `.`, empty segments and `..` folded lexically (as
 * the kernel would at `/`, `..` never climbs above it), no trailing slash. Null when not absolute.
 * Lexical is right here: the names are view names, resolved against the tree by mapView.
 */
export function normalizeView(p: string): string | null {
  if (!p.startsWith("/")) return null;
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return "/" + out.join("/");
}

/** True when a canonical view path is `/ctx` or below it. */
function inCtx(p: string): boolean {
  return p === "/ctx" || p.startsWith("/ctx/");
}

/**
 * Maps a view path under `/ctx` onto `root` (the host path of the tree; `/ctx` inside the
 * sandbox). Anything outside `/ctx` is not a tool directory of the tree and maps to null, so a
 * CTX_PATH naming `/usr/bin` can never reach host programs. A `..` is refused outright rather
 * than folded: callers normalize first (normalizeView), so one here is a caller's bug.
 */
export function mapView(root: string, p: string): string | null {
  if (!p.startsWith("/") || p.split("/").includes("..")) return null;
  if (p === "/ctx") return root;
  if (p.startsWith("/ctx/")) return root.replace(/\/$/, "") + p.slice(4);
  return null;
}

/**
 * Splits a CTX_PATH value into canonical entries (normalizeView), in order. Empty entries,
 * relative ones and any that lie outside `/ctx` once normalized (`/ctx/../usr/bin`) are dropped:
 * they are no tool directory of the tree. A repeated entry keeps its first place.
 */
export function splitCtxPath(value: string): string[] {
  const out: string[] = [];
  for (const raw of value.split(":")) {
    const p = normalizeView(raw);
    if (p !== null && inCtx(p) && !out.includes(p)) out.push(p);
  }
  return out;
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
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.PermissionDenied);
      continue;
    }
    return { path: `${dir === "/" ? "" : dir.replace(/\/$/, "")}/${name}`, host, dir: `${host}.d` };
  }
  return null;
}

/**
 * Parses `.tshrc`: data only, `CTX_PATH=...` lines, `#` comments and blank lines; never executed.
 * The last CTX_PATH line counts. Null when there is none. A CTX_PATH line with no usable entry
 * (`CTX_PATH=`, or only entries outside `/ctx`) is EINVAL: it would silently mean "no tools at
 * all", which is never what a person editing the file meant (decision in spec/tool-policy.md).
 */
export function parseTshrc(text: string): string[] | null {
  let found: string[] | null = null;
  let lineNo = 0, foundAt = 0, foundRaw = "";
  for (const raw of text.split("\n")) {
    lineNo++;
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("CTX_PATH=")) {
      foundRaw = line.slice("CTX_PATH=".length);
      found = splitCtxPath(foundRaw);
      foundAt = lineNo;
    }
    // Anything else (including `export`) is ignored: the file is not shell syntax.
  }
  if (found !== null && found.length === 0) {
    throw new CtxError(
      "EINVAL",
      `.tshrc line ${foundAt}: CTX_PATH=${
        JSON.stringify(foundRaw)
      } names no directory under /ctx ` +
        `(an empty CTX_PATH would disable every tool)`,
    );
  }
  return found;
}

/**
 * The CTX_PATH tsh uses. Inside an agent view (CTX_AGENT set) the runtime's CTX_PATH wins;
 * a standalone session reads `CTX_HOME/.tshrc`, then the inherited CTX_PATH, then the default.
 * A .tshrc that parseTshrc refuses is reported through `warn` and then ignored, as if absent.
 */
export function ctxPathFor(
  env: Record<string, string | undefined>,
  options: { tshrc?: string | null; uid: number; warn?: (message: string) => void },
): string[] {
  if (env.CTX_AGENT && env.CTX_PATH !== undefined) return splitCtxPath(env.CTX_PATH);
  let rc: string[] | null = null;
  try {
    rc = options.tshrc ? parseTshrc(options.tshrc) : null;
  } catch (e) {
    if (!(e instanceof CtxError)) throw e;
    options.warn?.(`${e}; .tshrc ignored`);
  }
  if (rc) return rc;
  if (env.CTX_PATH !== undefined) return splitCtxPath(env.CTX_PATH);
  return defaultCtxPath(options.uid);
}
