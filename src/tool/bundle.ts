/** Makes the single-file tsh bundle that runs inside sandboxes (`deno bundle`, offline), reusing a fresh one. */
import { CtxError, ignore } from "../abi/errno.ts";
import { tempName } from "../abi/names.ts";

const repo = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
const pending = new Map<string, Promise<string>>();
/** True inside the built single file: this module is part of a program bundle (`<lib>/<name>.js`). */
const BUILT = !import.meta.url.endsWith(".ts");

/**
 * Path of the bundle: `dist/tsh/tsh.js` in the checkout (where `deno task build` puts it too); in
 * the built single file, the `tsh.js` program bundle beside this one (packaging/build.ts).
 */
export const BUNDLE = BUILT
  ? new URL("./tsh.js", import.meta.url).pathname
  : `${repo}/dist/tsh/tsh.js`;

/** Options for {@link tshBundle}. */
export interface BundleOptions {
  /** The deno binary that bundles; default this one. */
  deno?: string;
  /** Output path; default {@link BUNDLE}. */
  out?: string;
  /** Rebuild even when the bundle is newer than its sources (the build does). */
  force?: boolean;
}

/** Newest mtime (ms) of the files a bundle is made from, or null when the sources are not on disk. */
function sourceTime(): number | null {
  if (BUILT) return null; // no sources beside a bundle, only what the build made
  let newest = -1;
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory) walk(p);
      else if (e.name.endsWith(".ts") || e.name.endsWith(".json")) {
        newest = Math.max(newest, Deno.statSync(p).mtime?.getTime() ?? Infinity);
      }
    }
  };
  try {
    newest = Math.max(newest, Deno.statSync(`${repo}/cli/tsh.ts`).mtime?.getTime() ?? Infinity);
    for (const d of ["src", "packaging"]) walk(`${repo}/${d}`);
    for (const f of ["deno.json", "deno.lock"]) {
      newest = Math.max(newest, Deno.statSync(`${repo}/${f}`).mtime?.getTime() ?? Infinity);
    }
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory);
    return null; // a compiled binary: no sources beside it, only what the build made
  }
  return newest;
}

/** The bundle's mtime (ms), or null when it does not exist. */
function bundleTime(path: string): number | null {
  try {
    return Deno.statSync(path).mtime?.getTime() ?? null;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return null;
  }
}

async function make(out: string, deno: string): Promise<string> {
  const dir = out.slice(0, out.lastIndexOf("/"));
  await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
  const tmp = `${dir}/${tempName(out.slice(dir.length + 1))}`;
  const res = await new Deno.Command(deno, {
    args: ["bundle", "--quiet", "--platform", "deno", "-o", tmp, `${repo}/cli/tsh.ts`],
    cwd: repo,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!res.success) {
    await Deno.remove(tmp).catch(() => {});
    throw new CtxError("EIO", `deno bundle failed: ${new TextDecoder().decode(res.stderr)}`);
  }
  await Deno.chmod(tmp, 0o644);
  await Deno.rename(tmp, out);
  return out;
}

/**
 * The tsh bundle (cli/tsh.ts with its npm dependencies inlined) at `out`. A bundle newer than
 * every source (cli/tsh.ts, src/, packaging/, deno.json/lock) is reused, so a built `dist/`
 * needs no bundler at run time; otherwise it is rebuilt once per process and path, through a
 * temp file and a rename so concurrent builders never expose a partial file.
 */
export function tshBundle(options: BundleOptions = {}): Promise<string> {
  const out = options.out ?? BUNDLE;
  let p = pending.get(out);
  if (!p || options.force) {
    p = (async () => {
      const built = bundleTime(out);
      const src = sourceTime();
      if (!options.force && built !== null && (src === null || built > src)) return out;
      if (src === null) {
        throw new CtxError("ENOENT", `no tsh bundle at ${out} and no sources to build one`);
      }
      return await make(out, options.deno ?? Deno.execPath());
    })();
    pending.set(out, p);
    p.catch(() => pending.delete(out));
  }
  return p;
}
