/** `ctx storage update [--check] [--dry-run] [--prune]`: the report lines and the exit code. */
import { EXIT } from "../abi/errno.ts";
import type { UpdateReport } from "../store/generation.ts";

/** Options of `ctx storage update` as parsed from the command line. */
export interface StorageUpdateArgs {
  storage: string;
  check?: boolean;
  dryRun?: boolean;
  prune?: boolean;
  env: Record<string, string | undefined>;
}

/** The lines printed for a report. */
export function reportLines(
  r: UpdateReport,
  args: { check?: boolean; dryRun?: boolean },
): string[] {
  const out: string[] = [];
  const would = args.dryRun ? "would " : "";
  if (args.check) {
    out.push(
      r.needed
        ? `update needed: tree_version ${r.from} -> ${r.to}`
        : `up to date: tree_version ${r.to}`,
    );
    for (const m of r.applied) out.push(`pending ${m.version} ${m.id}`);
    return out;
  }
  if (r.needed) {
    const verb = args.dryRun ? "would create" : "created";
    out.push(`${verb} generation ${r.created} (tree_version ${r.from} -> ${r.to})`);
    for (const m of r.applied) out.push(`${would}apply ${m.version} ${m.id}`);
    out.push(`${args.dryRun ? "would switch" : "switched"} current -> generations/${r.created}`);
  } else {
    out.push(`up to date: tree_version ${r.to} (current -> generations/${r.current})`);
  }
  for (const p of r.pruned) out.push(`${args.dryRun ? "would prune" : "pruned"} ${p}`);
  return out;
}

/**
 * Runs the update and prints its report. Exit code: 0, except `--check` answers 1 when an
 * update is needed (like `diff`: "differs" is not an error).
 */
export async function storageUpdate(args: StorageUpdateArgs): Promise<number> {
  const { update } = await import("../store/generation.ts");
  const { testHooks } = await import("../store/test_hooks.ts");
  const report = update(args.storage, {
    check: args.check,
    dryRun: args.dryRun,
    prune: args.prune,
    ...testHooks(args.env),
  });
  for (const line of reportLines(report, args)) console.log(line);
  return args.check && report.needed ? EXIT.generic : EXIT.ok;
}
