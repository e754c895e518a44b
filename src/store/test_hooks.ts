/**
 * Test hooks of `ctx storage update`, read from the environment only when set (documented in
 * spec/root-abi.md): `CORTEXFS_TEST_PAUSE_AT=<stage>` and `CORTEXFS_TEST_EXTRA_MIGRATION=1`.
 */
import type { Stage, UpdateOptions } from "./generation.ts";
import { STAGES } from "./generation.ts";
import { latestVersion, type Migration, MIGRATIONS } from "./migrate.ts";
import { makeDir, writeAll } from "./tree.ts";

/** The migration the extra-migration hook appends: adds the shared space `cortexfs-test`. */
export function testMigration(version: number): Migration {
  return {
    version,
    id: "test-marker",
    apply(dir) {
      makeDir(`${dir}/shared/cortexfs-test`);
      writeAll(`${dir}/shared/cortexfs-test`, { marker: `tree_version ${version}\n` });
    },
  };
}

/**
 * Blocks the process for good: the kill test SIGKILLs it here. Atomics.wait keeps the JS thread
 * parked without a timer or busy loop, so nothing after the stage runs.
 */
function pauseForever(stage: Stage): never {
  Deno.stderr.writeSync(new TextEncoder().encode(`ctx: test hook: paused at ${stage}\n`));
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(cell, 0, 0);
}

/** The update options the test hooks in `env` ask for (empty when none is set). */
export function testHooks(env: Record<string, string | undefined>): Partial<UpdateOptions> {
  const out: Partial<UpdateOptions> = {};
  const at = env.CORTEXFS_TEST_PAUSE_AT;
  if (at) {
    if (!(STAGES as readonly string[]).includes(at)) {
      throw new Error(`CORTEXFS_TEST_PAUSE_AT="${at}" is not one of ${STAGES.join(" ")}`);
    }
    out.onStage = (s) => {
      if (s === at) pauseForever(s);
    };
  }
  if (env.CORTEXFS_TEST_EXTRA_MIGRATION === "1") {
    out.migrations = [...MIGRATIONS, testMigration(latestVersion(MIGRATIONS) + 1)];
  }
  return out;
}
