/**
 * The required kill test: a real `ctx storage update` child is SIGKILLed in each stage (it parks
 * itself there through CORTEXFS_TEST_PAUSE_AT), then `current` must still be a whole valid
 * generation and the next update must succeed.
 */
import { assert, assertEquals } from "../assert.ts";
import { ctxArgv, ctxRun } from "../fixture/mod.ts";
import { names } from "./snapshot.ts";
import { treeProblems } from "../../src/store/validate.ts";
import { STAGES } from "../../src/store/generation.ts";

const EXTRA = { CORTEXFS_TEST_EXTRA_MIGRATION: "1" };

/** Starts `ctx storage update` paused at `stage`, waits for it to get there, then SIGKILLs it. */
async function killAt(storage: string, stage: string, env: Record<string, string>): Promise<void> {
  const [cmd, ...args] = ctxArgv();
  const child = new Deno.Command(cmd, {
    args: [...args, "storage", "update"],
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      CORTEXFS_STORAGE: storage,
      CORTEXFS_TEST_PAUSE_AT: stage,
      ...env,
    },
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let seen = "";
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (!seen.includes(`paused at ${stage}\n`)) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
    }
  } finally {
    child.kill("SIGKILL"); // paused or not, never leave it running
    await reader.cancel().catch(() => {});
    const status = await child.status;
    assertEquals(
      { stderr: seen, signal: status.signal },
      { stderr: `ctx: test hook: paused at ${stage}\n`, signal: "SIGKILL" },
    );
  }
}

/** What a killed build of generation `g` leaves, masked: temp names lose their pid and nonce. */
function leftovers(storage: string, g: string): string[] {
  const mask = (n: string) => n.replace(/\.tmp-.*$/, ".tmp-*");
  return [
    ...names(`${storage}/generations`).filter((n) => n === g || n.startsWith(`.${g}.`)).map(mask)
      .map((n) => `generations/${n}`),
    ...names(storage).filter((n) => n.startsWith(".current.")).map(mask),
  ];
}

function expectedLeftovers(stage: string, g: string): string[] {
  return stage === "switch" ? [`generations/${g}`, ".current.tmp-*"] : [`generations/.${g}.tmp-*`];
}

for (const stage of STAGES) {
  Deno.test(`storage update killed at "${stage}" keeps current whole; the next update succeeds`, async () => {
    const s = await Deno.makeTempDir({ prefix: "ctx-kill-" });
    try {
      assertEquals((await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s } })).code, 0);
      await killAt(s, stage, EXTRA);

      // The killed run left its half-built generation (or, at switch, a named one and a link temp).
      assertEquals(leftovers(s, "2"), expectedLeftovers(stage, "2"));
      // current still names the whole generation 1, at this binary's tree_version 5.
      assertEquals(Deno.readLinkSync(`${s}/current`), "generations/1");
      assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 5 }), []);

      const next = await ctxRun(["storage", "update"], { env: { CORTEXFS_STORAGE: s, ...EXTRA } });
      assertEquals([next.code, next.stderr], [0, ""]);
      const target = Deno.readLinkSync(`${s}/current`);
      assert(/^generations\/[23]$/.test(target), `current -> ${target}`);
      // The extra test migration is a real bump above the registry's latest (5 -> 6).
      assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 6 }), []);

      const pruned = await ctxRun(["storage", "update", "--prune"], {
        env: { CORTEXFS_STORAGE: s, ...EXTRA },
      });
      assertEquals([pruned.code, pruned.stderr], [0, ""]);
      assertEquals(names(`${s}/generations`), [target.slice("generations/".length)]);
      assertEquals(names(s), [".lock", "current", "generations"]);
    } finally {
      await Deno.remove(s, { recursive: true });
    }
  });

  Deno.test(`first storage update killed at "${stage}" leaves no current; the next one builds it`, async () => {
    const s = await Deno.makeTempDir({ prefix: "ctx-kill0-" });
    try {
      await killAt(s, stage, {});
      assertEquals(leftovers(s, "1"), expectedLeftovers(stage, "1"));
      assert(!names(s).includes("current"), "current must not exist after a killed first build");
      const next = await ctxRun(["storage", "update", "--prune"], { env: { CORTEXFS_STORAGE: s } });
      assertEquals([next.code, next.stderr], [0, ""]);
      assertEquals(treeProblems(`${s}/current`, { bootstrap: true, treeVersion: 5 }), []);
      assertEquals(names(`${s}/generations`).length, 1);
    } finally {
      await Deno.remove(s, { recursive: true });
    }
  });
}
