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

/** The operations; each returns a comparable value (never a path, inode or time). */
function ops(rand: () => number) {
  const pick = () => NAMES[Math.floor(rand() * NAMES.length)];
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
  return [
    {
      w: 12,
      name: "create",
      run: () => {
        const p = pick(), excl = rand() < 0.5;
        return (base: string) =>
          attempt(async () => {
            const f = await Deno.open(`${base}/${p}`, {
              write: true,
              create: !excl,
              createNew: excl,
              truncate: rand() < 0,
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
        return (base: string) =>
          attempt(async () => {
            const f = await Deno.open(`${base}/${p}`, { write: true });
            try {
              await f.seek(off, Deno.SeekMode.Start);
              let done = 0;
              while (done < data.length) done += await f.write(data.subarray(done));
              return done;
            } finally {
              f.close();
            }
          });
      },
    },
    {
      w: 6,
      name: "truncate",
      run: () => {
        const p = pick(), size = Math.floor(rand() * 100000);
        return (base: string) => attempt(() => Deno.truncate(`${base}/${p}`, size));
      },
    },
    {
      w: 10,
      name: "read",
      run: () => {
        const p = pick();
        return (base: string) =>
          attempt(async () => {
            const b = await Deno.readFile(`${base}/${p}`);
            let h = 0;
            for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]) >>> 0;
            return [b.length, h];
          });
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
            return [s.isFile, s.isDirectory, s.isFile ? s.size : 0, s.nlink, s.mode! & 0o7777];
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
        const p = pick(), mode = [0o600, 0o644, 0o755, 0o700][Math.floor(rand() * 4)];
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
        out.push(`${p}/ ${st.mode! & 0o7777}`);
        await walk(p);
      } else if (e.isSymlink) {
        out.push(`${p} -> ${await Deno.readLink(`${dir}/${p}`)}`);
      } else {
        const b = await Deno.readFile(`${dir}/${p}`);
        let h = 0;
        for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]) >>> 0;
        out.push(`${p} ${st.size} ${st.mode! & 0o7777} ${st.nlink} ${h}`);
      }
    }
  };
  await walk("");
  return out;
}
