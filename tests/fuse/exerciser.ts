/** A seeded randomized exerciser: the same operations on two directories, every result compared. */

/** A small seeded PRNG (mulberry32): the same seed gives the same operation sequence. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One operation's outcome: ok with a value, or the errno name it failed with. */
export type Outcome = { ok: unknown } | { err: string };

async function attempt(f: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: await f() };
  } catch (e) {
    return { err: (e as { code?: string }).code ?? (e as Error).name };
  }
}

const NAMES = ["a", "b", "c", "d0", "d1", "d0/a", "d0/b", "d0/d2", "d1/a", "d0/d2/a"];

/** Uid owning `fixed/other` in every worker's tree: neither root nor a worker. */
export const OTHER_UID = 65532;

/**
 * Makes the `fixed/` tree under `base` (as root): files and dirs a non-root worker does not own,
 * so that the operations that must fail (EACCES, EPERM) are exercised too. `uid:gid` is the worker.
 * Runs the same calls on both trees; on the mount they go through FUSE (mkdir, create, chown).
 */
export async function makeFixed(base: string, owner: { uid: number; gid: number }): Promise<void> {
  const f = `${base}/fixed`;
  await Deno.mkdir(f, { mode: 0o755 });
  await Deno.chmod(f, 0o755);
  const file = async (name: string, mode: number, uid: number, gid: number) => {
    await Deno.writeTextFile(`${f}/${name}`, `${name}\n`);
    await Deno.chmod(`${f}/${name}`, mode);
    await Deno.chown(`${f}/${name}`, uid, gid);
  };
  await file("rootfile", 0o644, 0, 0);
  await file("other", 0o644, OTHER_UID, OTHER_UID);
  await file("mine", 0o644, owner.uid, owner.gid);
  await file("ro", 0o444, owner.uid, owner.gid);
  await Deno.mkdir(`${f}/private`);
  await Deno.chmod(`${f}/private`, 0o700);
  await Deno.writeTextFile(`${f}/private/x`, "x\n");
  await Deno.chown(base, owner.uid, owner.gid);
}

/** Reads a file and returns [length, hash]. */
async function digest(path: string): Promise<[number, number]> {
  const b = await Deno.readFile(path);
  let h = 0;
  for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]) >>> 0;
  return [b.length, h];
}

/** Writes `data` at `off` through one open descriptor. */
async function writeAt(path: string, off: number, data: Uint8Array): Promise<number> {
  const f = await Deno.open(path, { write: true });
  try {
    await f.seek(off, Deno.SeekMode.Start);
    let done = 0;
    while (done < data.length) done += await f.write(data.subarray(done));
    return done;
  } finally {
    f.close();
  }
}

/**
 * Operations on `fixed/` (see {@link makeFixed}): as a worker that is not root every one must fail
 * with the same errno on both trees (others' files: chmod/chown/utime EPERM; writing a 0444 file,
 * writing, removing or creating in a root dir, entering a 0700 dir: EACCES); as root they succeed.
 */
const FIXED: [string, (base: string) => Promise<unknown>][] = [
  ["chmod others' file", (b) => Deno.chmod(`${b}/fixed/rootfile`, 0o600)],
  ["chmod others' file (non-root)", (b) => Deno.chmod(`${b}/fixed/other`, 0o666)],
  ["chown own file to root", (b) => Deno.chown(`${b}/fixed/mine`, 0, null)],
  ["chgrp own file to a foreign group", (b) => Deno.chown(`${b}/fixed/mine`, null, 0)],
  ["chown others' file to self", (b) => Deno.chown(`${b}/fixed/other`, Deno.uid(), null)],
  ["utime others' file", (b) => Deno.utime(`${b}/fixed/rootfile`, 1000, 2000)],
  ["write a 0444 file", (b) => writeAt(`${b}/fixed/ro`, 0, new Uint8Array([1]))],
  ["truncate a 0444 file", (b) => Deno.truncate(`${b}/fixed/ro`, 1)],
  ["write others' file", (b) => writeAt(`${b}/fixed/other`, 2, new Uint8Array([1, 2]))],
  ["read a 0444 file", (b) => digest(`${b}/fixed/ro`)],
  ["enter a 0700 dir", (b) => digest(`${b}/fixed/private/x`)],
  ["list a 0700 dir", async (b) => {
    const names: string[] = [];
    for await (const e of Deno.readDir(`${b}/fixed/private`)) names.push(e.name);
    return names.sort();
  }],
  ["create in a root dir", (b) => Deno.writeTextFile(`${b}/fixed/new`, "n")],
  ["mkdir in a 0700 dir", (b) => Deno.mkdir(`${b}/fixed/private/d`)],
  ["remove from a root dir", (b) => Deno.remove(`${b}/fixed/mine`)],
  ["rename out of a root dir", (b) => Deno.rename(`${b}/fixed/mine`, `${b}/moved`)],
  ["stat", async (b) => {
    const s = await Deno.lstat(`${b}/fixed/other`);
    return [s.size, s.mode! & 0o7777, s.uid, s.gid];
  }],
];

/** The operations; each returns a comparable value (never a path, inode or time). */
function ops(rand: () => number) {
  const pick = () => NAMES[Math.floor(rand() * NAMES.length)];
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
  return [
    {
      w: 12,
      name: "create",
      run: () => {
        const p = pick(), excl = rand() < 0.5, truncate = rand() < 0.5;
        return (base: string) =>
          attempt(async () => {
            const f = await Deno.open(`${base}/${p}`, {
              write: true,
              create: !excl,
              createNew: excl,
              truncate,
            });
            f.close();
            return p;
          });
      },
    },
    {
      w: 20,
      name: "write",
      run: () => {
        const p = pick(),
          off = Math.floor(rand() * 200000),
          data = bytes(1 + Math.floor(rand() * 70000));
        return (base: string) => attempt(() => writeAt(`${base}/${p}`, off, data));
      },
    },
    {
      w: 6,
      name: "truncate",
      run: () => {
        const p = pick(), size = Math.floor(rand() * 100000), open = rand() < 0.5;
        // truncate(2) on the path, or ftruncate(2) on a descriptor opened for writing
        return (base: string) =>
          attempt(async () => {
            if (!open) return await Deno.truncate(`${base}/${p}`, size);
            const f = await Deno.open(`${base}/${p}`, { write: true });
            try {
              await f.truncate(size);
              return (await f.stat()).size;
            } finally {
              f.close();
            }
          });
      },
    },
    {
      w: 10,
      name: "read",
      run: () => {
        const p = pick();
        return (base: string) => attempt(() => digest(`${base}/${p}`));
      },
    },
    {
      w: 8,
      name: "stat",
      run: () => {
        const p = pick();
        return (base: string) =>
          attempt(async () => {
            const s = await Deno.lstat(`${base}/${p}`);
            const size = s.isFile ? s.size : 0;
            return [s.isFile, s.isDirectory, size, s.nlink, s.mode! & 0o7777, s.uid, s.gid];
          });
      },
    },
    {
      w: 8,
      name: "rename",
      run: () => {
        const a = pick(), b = pick();
        return (base: string) => attempt(() => Deno.rename(`${base}/${a}`, `${base}/${b}`));
      },
    },
    {
      w: 6,
      name: "remove",
      run: () => {
        const p = pick();
        return (base: string) => attempt(() => Deno.remove(`${base}/${p}`));
      },
    },
    {
      w: 8,
      name: "mkdir",
      run: () => {
        const p = pick();
        return (base: string) => attempt(() => Deno.mkdir(`${base}/${p}`));
      },
    },
    {
      w: 4,
      name: "rmdir-recursive-fails",
      run: () => {
        const p = pick();
        // Deno.remove without recursive on a non-empty dir must fail ENOTEMPTY on both
        return (base: string) => attempt(() => Deno.remove(`${base}/${p}`, { recursive: false }));
      },
    },
    {
      w: 4,
      name: "chmod",
      run: () => {
        const p = pick(), mode = [0o600, 0o644, 0o755, 0o700, 0o444][Math.floor(rand() * 5)];
        return (base: string) => attempt(() => Deno.chmod(`${base}/${p}`, mode));
      },
    },
    {
      w: 5,
      name: "list",
      run: () => {
        const p = ["", "d0", "d1", "d0/d2", "a"][Math.floor(rand() * 5)];
        return (base: string) =>
          attempt(async () => {
            const names: string[] = [];
            for await (const e of Deno.readDir(`${base}/${p}`)) {
              names.push(`${e.name}:${e.isDirectory}`);
            }
            return names.sort();
          });
      },
    },
    {
      w: 3,
      name: "link",
      run: () => {
        const a = pick(), b = pick();
        return (base: string) => attempt(() => Deno.link(`${base}/${a}`, `${base}/${b}`));
      },
    },
    {
      w: 8,
      name: "fixed",
      run: () => {
        const [name, f] = FIXED[Math.floor(rand() * FIXED.length)];
        return (base: string) =>
          attempt(() => f(base)).then((o): Outcome =>
            "ok" in o ? { ok: [name, o.ok] } : { err: `${name}: ${o.err}` }
          );
      },
    },
    {
      w: 3,
      name: "symlink",
      run: () => {
        const p = pick();
        return (base: string) =>
          attempt(async () => {
            await Deno.symlink("target-x", `${base}/${p}`);
            return await Deno.readLink(`${base}/${p}`);
          });
      },
    },
  ];
}

/** One difference between the two trees. */
export interface Mismatch {
  step: number;
  op: string;
  got: Outcome;
  want: Outcome;
}

/**
 * Runs `count` seeded operations on `under` and on `reference` (one at a time, each on both,
 * reference first) and returns every mismatch of value or errno.
 */
export async function exercise(
  under: string,
  reference: string,
  options: { seed: number; count: number; trace?: { op: string; want: Outcome }[] },
): Promise<Mismatch[]> {
  const rand = prng(options.seed);
  const table = ops(rand);
  const total = table.reduce((s, o) => s + o.w, 0);
  const out: Mismatch[] = [];
  for (let step = 0; step < options.count; step++) {
    let r = rand() * total;
    const op = table.find((o) => (r -= o.w) < 0) ?? table[0];
    const run = op.run();
    const want = await run(reference);
    const got = await run(under);
    options.trace?.push({ op: op.name, want });
    if (JSON.stringify(got) !== JSON.stringify(want)) out.push({ step, op: op.name, got, want });
  }
  return out;
}

/** How often each errno name was the expected outcome in a trace. */
export function tally(trace: { want: Outcome }[]): Record<string, number> {
  const n: Record<string, number> = {};
  for (const { want } of trace) {
    if ("err" in want) {
      const name = want.err.replace(/^.*: /, "");
      n[name] = (n[name] ?? 0) + 1;
    }
  }
  return n;
}

/** A recursive listing with types, sizes and content hashes, for a final whole-tree comparison. */
export async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const names: Deno.DirEntry[] = [];
    for await (const e of Deno.readDir(`${dir}/${rel}`)) names.push(e);
    names.sort((a, b) => a.name < b.name ? -1 : 1);
    for (const e of names) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      const st = await Deno.lstat(`${dir}/${p}`);
      if (e.isDirectory) {
        out.push(`${p}/ ${st.mode! & 0o7777} ${st.uid}:${st.gid}`);
        await walk(p);
      } else if (e.isSymlink) {
        out.push(`${p} -> ${await Deno.readLink(`${dir}/${p}`)} ${st.uid}:${st.gid}`);
      } else {
        const b = await Deno.readFile(`${dir}/${p}`);
        let h = 0;
        for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]) >>> 0;
        out.push(`${p} ${st.size} ${st.mode! & 0o7777} ${st.nlink} ${st.uid}:${st.gid} ${h}`);
      }
    }
  };
  await walk("");
  return out;
}

if (import.meta.main) {
  // `exerciser.ts UNDER REFERENCE SEED COUNT`: one worker in a process of its own (the test runs
  // it as another uid through setpriv); prints the mismatches as JSON.
  const [under, reference, seed, count] = Deno.args;
  const trace: { op: string; want: Outcome }[] = [];
  const found = await exercise(under, reference, {
    seed: Number(seed),
    count: Number(count),
    trace,
  });
  console.log(JSON.stringify({ mismatches: found, errnos: tally(trace) }));
}
