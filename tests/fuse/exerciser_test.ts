/** The seeded randomized exerciser on /ctx/home against a tmpfs directory: 4 workers (2 of them not root), 10,000 ops. */
import { assertEquals } from "../assert.ts";
import { cleanup, type Daemon, DENO, makeTree, run, startDaemon } from "../fixture/mod.ts";
import { exercise, makeFixed, type Mismatch, type Outcome, snapshot, tally } from "./exerciser.ts";

const SEED = Number(Deno.env.get("CORTEXFS_EXERCISER_SEED") ?? 20261130);
const OPS = 10_000;
/** Worker uids: two run in this (root) process, two in processes of their own through setpriv. */
const UIDS = [0, 0, 65534, 65533];
const EXERCISER = new URL("./exerciser.ts", import.meta.url).pathname;

/** Runs one worker as `uid` in a child process (setpriv); returns its mismatches and errno counts. */
async function asUser(
  uid: number,
  dir: string,
  args: { under: string; ref: string; seed: number; count: number },
): Promise<{ mismatches: Mismatch[]; errnos: Record<string, number> }> {
  const home = `${dir}/user${uid}`;
  await Deno.mkdir(home);
  await Deno.chown(home, uid, uid);
  const out = await run(
    [
      DENO,
      "run",
      "-A",
      "--quiet",
      EXERCISER,
      args.under,
      args.ref,
      String(args.seed),
      String(args.count),
    ],
    {
      uid,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: home, DENO_DIR: `${home}/deno` },
      clearEnv: true,
    },
  );
  assertEquals(out.code, 0, out.stderr);
  return JSON.parse(out.stdout);
}

Deno.test(`exerciser: ${OPS} seeded ops, ${UIDS.length} concurrent workers (uids ${UIDS}), /ctx/home vs tmpfs: same values and errnos`, async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  let shm = "/dev/shm";
  try {
    Deno.statSync(shm);
  } catch {
    shm = "/tmp";
  }
  const ref = await Deno.makeTempDir({ dir: shm, prefix: "cortexfs-ref-" });
  await Deno.chmod(ref, 0o755); // the workers that are not root must reach their subtrees
  try {
    d = await startDaemon(tree);
    const home = `${tree.mount}/home`;
    await Deno.mkdir(`${home}/0/ex`);
    // Each worker owns its subtree on both sides: home/<uid>/ex on the mount (made by root
    // through the mount, like `ctx` would), ref/w<i> in tmpfs; fixed/ holds what it does not own.
    const unders = UIDS.map((uid, i) => uid === 0 ? `${home}/0/ex/w${i}` : `${home}/${uid}/ex`);
    for (const [i, uid] of UIDS.entries()) {
      if (uid !== 0) {
        await Deno.mkdir(`${home}/${uid}`, { mode: 0o700 });
        await Deno.chown(`${home}/${uid}`, uid, uid);
      }
      for (const base of [unders[i], `${ref}/w${i}`]) {
        await Deno.mkdir(base);
        await makeFixed(base, { uid, gid: uid });
      }
    }
    const results = await Promise.all(
      UIDS.map(async (uid, i) => {
        const job = { under: unders[i], ref: `${ref}/w${i}`, seed: SEED + i, count: OPS / 4 };
        if (uid !== 0) return await asUser(uid, tree.dir, job);
        const trace: { op: string; want: Outcome }[] = [];
        const mismatches = await exercise(job.under, job.ref, { ...job, trace });
        return { mismatches, errnos: tally(trace) };
      }),
    );
    assertEquals(results.flatMap((r) => r.mismatches).slice(0, 5), [], `seed ${SEED}`);
    // the sequences reach the errnos they are meant to compare: EACCES only where a worker is
    // not root (its fixed/ operations, 0444 and 0600 modes), EPERM there too (others' files;
    // root meets it only in rare cases such as a link to a directory), the usual ones everywhere
    const seen = results.map((r, i) => {
      const has = (e: string) => (r.errnos[e] ?? 0) > 0;
      return [UIDS[i], has("ENOENT"), has("EEXIST"), has("ENOTEMPTY"), has("EACCES"), has("EPERM")];
    });
    assertEquals(
      seen.map(([u, ...rest]) => [u, ...rest.slice(0, 4), u === 0 || rest[4]]),
      UIDS.map((u) => [u, true, true, true, u !== 0, true]),
      JSON.stringify(results.map((r) => r.errnos)),
    );
    for (const [i] of UIDS.entries()) {
      assertEquals(await snapshot(unders[i]), await snapshot(`${ref}/w${i}`), `worker ${i}`);
    }
  } finally {
    await Deno.remove(ref, { recursive: true }).catch(() => {});
    await cleanup(tree, d);
  }
});
