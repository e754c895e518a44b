/** What an ABI path is in the /ctx projection: the frozen root, a projection, a control or plain files. */
import { tempTarget } from "../abi/names.ts";

/** The frozen root, in spec order: nothing else exists or can be created at the root. */
export const ROOT_NAMES = ["status", "bin", "model", "agent", "tool", "home", "shared"] as const;

/**
 * - `root`: the mount root (frozen);
 * - `status`: the dynamic read-only status file;
 * - `sock`: `agent/<n>.sock`, a symlink to the live socket under the run dir;
 * - `launcher`: `bin/<binary>`, a read-only launcher script;
 * - `ro`: a read-only projection of the backing tree (object dirs, definitions, `bin/` files);
 * - `cdir`: a control directory (`agent/<n>.d`, `model/<p>/<m>.d`, `tool/<n>.d`; never below
 *   `home/` or `shared/`);
 * - `control`: a name directly inside a control directory (a control, or an in-memory temp);
 * - `rw`: `home/...` and `shared/...`, ordinary read-write files in the backing tree (all of it);
 * - `stage`: `agent/.<n>.tmp-…`, a new agent entry being written before its rename to `agent/<n>`;
 * - `none`: a name at the root outside the frozen list.
 */
export type Kind =
  | "root"
  | "status"
  | "sock"
  | "launcher"
  | "ro"
  | "cdir"
  | "control"
  | "rw"
  | "stage"
  | "none";

/** Classifies `path` (relative, no leading slash; "" is the root); `bins` are the launcher names. */
export function classify(path: string, bins: ReadonlySet<string>): Kind {
  if (path === "") return "root";
  const p = path.split("/");
  switch (p[0]) {
    case "status":
      return p.length === 1 ? "status" : "none";
    case "home":
    case "shared":
      // Ordinary user storage, every name in it: a `.d` directory there (`home/<uid>/tool/x.d`,
      // `model/a/b.d`) is a plain directory, written like any other (spec/fuse.md "Operations").
      // What is special below home/ is not a kind: `home` itself (one directory per uid, the
      // structural rules in tree.ts) and the agent homes the runtime writes behind the mount
      // (`home/<uid>/agent/...`, `shared/<space>/agent/...`: timeout 0, parents opened afresh).
      return "rw";
    case "bin":
      return p.length === 2 && bins.has(p[1]) ? "launcher" : "ro";
    case "agent":
    case "tool":
      if (p.length === 2) {
        if (p[0] === "agent" && p[1].endsWith(".sock") && p[1].length > 5) return "sock";
        if (p[0] === "agent" && stagedName(p[1]) !== null) return "stage";
        return p[1].endsWith(".d") ? "cdir" : "ro";
      }
      if (p.length === 3 && p[1].endsWith(".d")) return "control";
      return "ro";
    case "model":
      if (p.length === 3 && p[2].endsWith(".d")) return "cdir";
      if (p.length === 4 && p[2].endsWith(".d")) return "control";
      return "ro";
    default:
      return "none";
  }
}

/** The parent path of `path` ("" for a root entry). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

/** The last component of `path`. */
export function baseOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/**
 * Names editors and tools use for the temp file they rename over a control (`sed -i`: sedXXXXXX;
 * dot files such as `.window.tmp-…`, `.window.swp`; backups ending in `~`). Only these may be
 * created in a control directory besides the known controls; they live in memory.
 */
export function isTempName(name: string): boolean {
  return /^sed[A-Za-z0-9]{6}$/.test(name) || (name.startsWith(".") && name.length > 1) ||
    name.endsWith("~");
}

/**
 * The agent a staged entry name belongs to: `.<n>.tmp-<pid>-<hex>[-<attempt>]` (the temp name
 * src/store/atomic.ts gives `agent/<n>`) names `<n>`; anything else is null.
 */
export function stagedName(name: string): string | null {
  return tempTarget(name);
}
