/** The ordered migration registry: each entry turns tree_version N-1 into N (1 initial tree, 2 tsh config, 3 root-owned definitions, 4 secret control modes, 5 the debug/script model). */
import { CtxError } from "../abi/errno.ts";
import { addTshConfig, buildInitialTree, type TreeContext } from "./tree.ts";
import { rootOwnDefinitions } from "./root_owned.ts";
import { privateSecretControls } from "./secret_modes.ts";
import { addScriptModel } from "./script_model.ts";

/** One migration: `apply` edits a private clone of the previous generation in place. */
export interface Migration {
  /** The tree_version this migration produces (1, 2, ...; strictly ascending, no gaps). */
  version: number;
  /** Stable audit id recorded in `applied_migrations`. */
  id: string;
  /** Edits the generation directory `dir` (never visible to readers while it runs). */
  apply(dir: string, ctx: TreeContext): void;
}

/** The registry of this binary. Later issues append versions; never edit or reorder shipped ones. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, id: "initial-tree", apply: buildInitialTree },
  { version: 2, id: "tsh-config", apply: addTshConfig },
  { version: 3, id: "root-owned-definitions", apply: rootOwnDefinitions },
  { version: 4, id: "secret-control-modes", apply: privateSecretControls },
  { version: 5, id: "debug-script-model", apply: addScriptModel },
];

/** Checks a registry's shape: versions 1..N in order, unique ids of the name grammar. */
export function checkRegistry(registry: readonly Migration[]): void {
  const ids = new Set<string>();
  registry.forEach((m, i) => {
    if (m.version !== i + 1) {
      throw new CtxError(
        "EINVAL",
        `migration registry: entry ${i} has version ${m.version}, expected ${i + 1}`,
      );
    }
    if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(m.id) || ids.has(m.id)) {
      throw new CtxError("EINVAL", `migration registry: bad or duplicate id "${m.id}"`);
    }
    ids.add(m.id);
  });
}

/** The tree_version a registry builds (its last version; 0 for an empty registry). */
export function latestVersion(registry: readonly Migration[]): number {
  return registry.length === 0 ? 0 : registry[registry.length - 1].version;
}

/** The migrations to apply to a tree at `from`, in ascending order. */
export function pendingMigrations(registry: readonly Migration[], from: number): Migration[] {
  return registry.filter((m) => m.version > from);
}
