/** Storage generations: build the next tree beside the current one, then switch `current` atomically. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { tempName } from "../abi/names.ts";
import { ensureDir, syncDir } from "./atomic.ts";
import { readBootstrap, writeBootstrap } from "./bootstrap.ts";
import { cloneTree } from "./clone.ts";
import {
  checkRegistry,
  latestVersion,
  type Migration,
  MIGRATIONS,
  pendingMigrations,
} from "./migrate.ts";
import { validateTree } from "./validate.ts";
import { isServed } from "./serving.ts";

/** The stages of an update, in order (the test hook can stop the process in each). */
export const STAGES = ["clone", "migrate", "validate", "bootstrap", "switch"] as const;

/** One stage of an update. */
export type Stage = typeof STAGES[number];

/** Options for {@link update}. */
export interface UpdateOptions {
  /** Only report whether an update is needed; write nothing. */
  check?: boolean;
  /** Report what would be done; write nothing. */
  dryRun?: boolean;
  /** After updating, remove every non-current generation and half-built leftovers. */
  prune?: boolean;
  /** Owner of the default agent and of `home/<uid>/` in a new tree (default: the caller). */
  uid?: number;
  gid?: number;
  /** Creation time in unix seconds for new metadata (default: now). */
  now?: number;
  /** The migration registry (default: this binary's {@link MIGRATIONS}). */
  migrations?: readonly Migration[];
  /** Called as each stage is under way; used by the kill test hook (see test_hooks.ts). */
  onStage?: (stage: Stage) => void;
}

/** What an update did (or, with check/dryRun, would do). */
export interface UpdateReport {
  /** The storage root. */
  storage: string;
  /** The on-disk tree_version before the update (0 = empty storage root). */
  from: number;
  /** The tree_version of this binary's registry. */
  to: number;
  /** True when `from < to`. */
  needed: boolean;
  /** Migrations applied (or that would be applied), in order. */
  applied: { version: number; id: string }[];
  /** Name of the generation created (or that would be created), e.g. "2". */
  created: string | null;
  /** Name of the generation `current` points to afterwards. */
  current: string | null;
  /** Entries of `generations/` removed (or that would be removed) by prune. */
  pruned: string[];
  /** True when nothing was written (check or dry run). */
  readOnly: boolean;
}

const GEN_NAME = /^[1-9][0-9]{0,9}$/;
const GEN_TEMP = /^\.[1-9][0-9]{0,9}\.tmp-/;
const CURRENT_TEMP = /^\.current\.tmp-/;

/** The name (`"3"`) of the generation `current` points to, or null on an empty storage root. */
export function currentName(storage: string): string | null {
  let target: string;
  try {
    target = Deno.readLinkSync(`${storage}/current`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw toCtxError(e, `${storage}/current`);
  }
  const m = /^generations\/([1-9][0-9]{0,9})$/.exec(target);
  if (!m) {
    throw new CtxError("EIO", `current points to "${target}", not generations/<g>`, {
      path: `${storage}/current`,
    });
  }
  return m[1];
}

/** Absolute path of the concrete generation directory `current` points to (ENOENT when none). */
export function currentGeneration(storage: string): string {
  const name = currentName(storage);
  if (name === null) {
    throw new CtxError("ENOENT", "no current generation (run `ctx storage update`)", {
      path: `${storage}/current`,
    });
  }
  const dir = `${Deno.realPathSync(storage)}/generations/${name}`;
  try {
    if (!Deno.statSync(dir).isDirectory) throw new Error("not a directory");
  } catch (e) {
    throw new CtxError("EIO", `current points to a missing generation: ${e}`, { path: dir });
  }
  return dir;
}

function listDir(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw toCtxError(e, dir);
  }
}

/**
 * What prune removes: every generation but `keep` and those a running cortexfsd serves, half-built
 * generations, stale `current` temps, and serving lock files of generations that are gone.
 */
function pruneList(storage: string, keep: string | null): string[] {
  const gens = listDir(`${storage}/generations`)
    .filter((n) => (GEN_NAME.test(n) && n !== keep && !isServed(storage, n)) || GEN_TEMP.test(n))
    .map((n) => `generations/${n}`);
  const kept = new Set(
    listDir(`${storage}/generations`).filter((n) =>
      GEN_NAME.test(n) && !gens.includes(`generations/${n}`)
    ),
  );
  const temps = listDir(storage).filter((n) => CURRENT_TEMP.test(n));
  // A lock file outlives its generation only when nobody holds it.
  const locks = listDir(storage).filter((n) => {
    const g = /^\.serving-([1-9][0-9]{0,9})$/.exec(n)?.[1];
    return g !== undefined && !kept.has(g) && !isServed(storage, g);
  });
  return [...gens, ...temps, ...locks];
}

function prune(storage: string, list: string[]): void {
  for (const rel of list) {
    Deno.removeSync(`${storage}/${rel}`, { recursive: true });
  }
  if (list.length) {
    syncDir(`${storage}/generations`);
    syncDir(storage);
  }
}

/** fsyncs every directory below `dir` (files were fsynced as they were written). */
function syncDirs(dir: string): void {
  for (const e of Deno.readDirSync(dir)) {
    if (e.isDirectory) syncDirs(`${dir}/${e.name}`);
  }
  syncDir(dir);
}

/** Holds an exclusive flock on `<storage>/.lock` while `fn` runs (a killed holder releases it). */
function withLock<T>(storage: string, fn: () => T): T {
  const f = Deno.openSync(`${storage}/.lock`, {
    read: true,
    write: true,
    create: true,
    mode: 0o600,
  });
  try {
    f.lockSync(true);
    return fn();
  } finally {
    f.close();
  }
}

/**
 * Brings the storage root to this binary's tree_version. On an empty root it builds generation 1;
 * otherwise it clones `current` into a temp generation, applies the pending migrations, validates
 * the result, writes the bootstrap file last, renames the generation into place and only then
 * switches `current`. A failure or kill at any point leaves `current` on a whole generation.
 */
export function update(storage: string, options: UpdateOptions = {}): UpdateReport {
  const registry = options.migrations ?? MIGRATIONS;
  checkRegistry(registry);
  const readOnly = !!(options.check || options.dryRun);
  const run = () => plan(storage, registry, options, readOnly);
  if (readOnly) return run();
  ensureDir(storage, 0o755);
  return withLock(storage, run);
}

function plan(
  storage: string,
  registry: readonly Migration[],
  options: UpdateOptions,
  readOnly: boolean,
): UpdateReport {
  const to = latestVersion(registry);
  const cur = currentName(storage);
  const curDir = cur === null ? null : `${storage}/generations/${cur}`;
  const from = curDir === null ? 0 : readBootstrap(curDir).tree_version;
  if (from > to) {
    throw new CtxError(
      "ENOTSUP",
      `on-disk tree_version ${from} is newer than this binary's ${to}; refusing to touch it`,
      { path: `${storage}/current` },
    );
  }
  const pending = pendingMigrations(registry, from);
  const report: UpdateReport = {
    storage,
    from,
    to,
    needed: pending.length > 0,
    applied: pending.map((m) => ({ version: m.version, id: m.id })),
    created: null,
    current: cur,
    pruned: [],
    readOnly,
  };
  if (options.check) return report;
  const next = String(
    Math.max(0, ...listDir(`${storage}/generations`).filter((n) => GEN_NAME.test(n)).map(Number)) +
      1,
  );
  if (report.needed) report.created = next;
  if (options.dryRun) {
    if (options.prune) report.pruned = pruneList(storage, report.created ?? cur);
    return report;
  }
  if (report.needed && cur !== null && isServed(storage, cur)) {
    // The daemon resolved current once at startup: writes it takes after our clone would be lost
    // when it restarts on the new generation. Updates happen at the restart boundary.
    throw new CtxError(
      "EBUSY",
      `a running cortexfsd serves generation ${cur}: stop it, update, then start it again`,
      { path: `${storage}/current` },
    );
  }
  if (report.needed) {
    build(storage, { curDir, next, from, pending, registry, options });
    report.current = next;
  }
  if (options.prune) {
    report.pruned = pruneList(storage, report.current);
    prune(storage, report.pruned);
  }
  return report;
}

/**
 * migrate: the pending migrations in ascending versions, each editing the private copy `tmp`;
 * returns the applied list the bootstrap records (current's, then these).
 */
function migrate(
  tmp: string,
  p: { curDir: string | null; pending: Migration[]; options: UpdateOptions },
  stage: (s: Stage) => void,
) {
  const ctx = {
    uid: p.options.uid ?? Deno.uid() ?? 0,
    gid: p.options.gid ?? Deno.gid() ?? 0,
    now: p.options.now ?? Math.floor(Date.now() / 1000),
  };
  const applied = p.curDir ? readBootstrap(p.curDir).applied_migrations : [];
  p.pending.forEach((m, i) => {
    try {
      m.apply(tmp, ctx);
    } catch (e) {
      const err = toCtxError(e, tmp);
      throw new CtxError(err.errno, `migration ${m.version} (${m.id}) failed: ${err.message}`, {
        path: err.path,
        cause: e,
      });
    }
    applied.push({ version: m.version, id: m.id });
    if (i === 0) stage("migrate");
  });
  return applied;
}

function build(
  storage: string,
  p: {
    curDir: string | null;
    next: string;
    from: number;
    pending: Migration[];
    registry: readonly Migration[];
    options: UpdateOptions;
  },
): void {
  const stage = p.options.onStage ?? (() => {});
  const gens = `${storage}/generations`;
  ensureDir(gens, 0o755);
  const tmp = `${gens}/${tempName(p.next)}`;
  const final = `${gens}/${p.next}`;
  let renamed = false, switched = false;
  try {
    // clone: a private copy of current (or an empty directory for the first generation).
    Deno.mkdirSync(tmp, { mode: 0o755 });
    Deno.chmodSync(tmp, 0o755);
    syncDir(gens);
    let announced = false;
    const announce = () => {
      if (!announced) stage("clone");
      announced = true;
    };
    if (p.curDir) cloneTree(p.curDir, tmp, { onEntry: announce });
    announce();

    const applied = migrate(tmp, p, stage);

    // validate: the whole result, before anything points at it.
    stage("validate");
    validateTree(tmp);

    // bootstrap: written last inside the generation, then every directory is made durable.
    writeBootstrap(tmp, {
      schema: "cortexfs.bootstrap/v1",
      tree_version: latestVersion(p.registry),
      applied_migrations: applied,
    });
    stage("bootstrap");
    syncDirs(tmp);

    // switch: name the generation, then repoint current with symlink-to-temp + rename.
    Deno.renameSync(tmp, final);
    renamed = true;
    syncDir(gens);
    const link = `${storage}/${tempName("current")}`;
    Deno.symlinkSync(`generations/${p.next}`, link);
    stage("switch");
    Deno.renameSync(link, `${storage}/current`);
    switched = true;
    syncDir(storage);
  } catch (e) {
    // current was not switched: the half-built generation is debris; prune would remove it too.
    if (!switched) {
      try {
        Deno.removeSync(renamed ? final : tmp, { recursive: true });
      } catch { /* any kind: cleanup on the way out, the real error is thrown next */ }
    }
    throw toCtxError(e, tmp);
  }
}
