/** The seeded randomized exerciser on /ctx/home against a tmpfs directory: 4 workers, 10,000 ops. */
import { assertEquals } from "../assert.ts";
import { cleanup, type Daemon, makeTree, startDaemon } from "./fixture.ts";
import { exercise, snapshot } from "./exerciser.ts";

const SEED = Number(Deno.env.get("CORTEXFS_EXERCISER_SEED") ?? 20261130);
const OPS = 10_000;
const WORKERS = 4;

Deno.test(`exerciser: ${OPS} seeded ops, ${WORKERS} concurrent workers, /ctx/home vs tmpfs: same values and errnos`, async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  let shm = "/dev/shm";
  try {
    Deno.statSync(shm);
  } catch {
    shm = "/tmp";
  }
  const ref = await Deno.makeTempDir({ dir: shm, prefix: "cortexfs-ref-" });
  try {
    d = await startDaemon(tree);
    const under = `${tree.mount}/home/0/ex`;
    await Deno.mkdir(under);
    const results = await Promise.all(
      Array.from({ length: WORKERS }, async (_, i) => {
        await Deno.mkdir(`${under}/w${i}`);
        await Deno.mkdir(`${ref}/w${i}`);
        return await exercise(`${under}/w${i}`, `${ref}/w${i}`, {
          seed: SEED + i,
          count: OPS / WORKERS,
        });
      }),
    );
    assertEquals(results.flat().slice(0, 5), [], `seed ${SEED}`);
    assertEquals(await snapshot(under), await snapshot(ref));
  } finally {
    await Deno.remove(ref, { recursive: true }).catch(() => {});
    await cleanup(d, tree);
  }
});
