/**
 * `deno task build`: makes the single downloadable file dist/cortexfs-<version>-linux-x86_64
 * (packaging/single.ts: every program, the pinned deno, no checkout needed), and for work in the
 * checkout dist/bin/{ctx,tsh,ctxterm,cortexfsd} (+ agent.sh) and the in-sandbox tsh bundle
 * dist/tsh/tsh.js. dist/bin holds compiled binaries when a denort runtime is available offline
 * (DENORT_BIN, or the zip pre-seeded in DENO_DIR), otherwise launcher scripts that exec the pinned
 * deno with the same permission flags on the entry files.
 */
import { tshBundle } from "../src/tool/bundle.ts";
import { VERSION } from "../src/abi/version.ts";
import { buildSingle, type SingleResult } from "./single.ts";
import { ignore } from "../src/abi/errno.ts";

const here = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DENO_VERSION = "2.9.6";
const BINARIES = ["ctx", "tsh", "ctxterm", "cortexfsd"] as const;
/** Modules a binary loads that `deno compile` does not find by itself: Worker entries. */
const INCLUDES: Partial<Record<(typeof BINARIES)[number], string[]>> = {
  cortexfsd: ["src/fuse/worker.ts"], // the mount's own thread (src/fuse/thread.ts)
};

/** Build options (command line: `--out DIR`, `--mode compile|launcher`). */
export interface BuildOptions {
  /** Output directory of the binaries; default `<checkout>/dist/bin`. */
  out?: string;
  /** Force a mode; default: compile when a denort runtime is found, else launcher. */
  mode?: "compile" | "launcher";
  /** The environment to look for DENORT_BIN / DENO_DIR in. */
  env?: Record<string, string | undefined>;
  /** Where the tsh bundle goes; default `<out>/../tsh/tsh.js` (dist/tsh/tsh.js). */
  bundle?: string;
  /** Where the single file goes (default {@link SINGLE}); `false` makes none. */
  single?: string | false;
}

/** The single downloadable file of this version. */
export const SINGLE = `${here}/dist/cortexfs-${VERSION}-linux-x86_64`;

/**
 * The programs of the single file: every key of src/program/permissions.json (one line there adds
 * a program) whose entry `cli/<name>.ts` exists, `cortexfs` (the multi-call entry) included.
 */
export function programs(): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(permissionFlags()).filter(([n]) => exists(`${here}/cli/${n}.ts`)),
  );
}

/** What the build made. */
export interface BuildResult {
  mode: "compile" | "launcher";
  out: string;
  built: string[];
  skipped: string[];
  /** Path of the tsh bundle, when it was made. */
  bundle?: string;
  /** The single file, when it was made. */
  single?: SingleResult;
}

/** The per-binary Deno permission flags (src/program/permissions.json). */
export function permissionFlags(): Record<string, string[]> {
  return JSON.parse(Deno.readTextFileSync(`${here}/src/program/permissions.json`));
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/** The offline denort route, if any: `DENORT_BIN`, or the release zip pre-seeded in DENO_DIR. */
export function findDenort(env: Record<string, string | undefined>): string | undefined {
  if (env.DENORT_BIN && exists(env.DENORT_BIN)) return env.DENORT_BIN;
  const dir = env.DENO_DIR ?? `${env.HOME ?? "/root"}/.cache/deno`;
  const zip = `${dir}/dl/release/v${DENO_VERSION}/denort-x86_64-unknown-linux-gnu.zip`;
  return exists(zip) ? zip : undefined;
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The launcher script of one binary: the pinned deno, its flags, its entry file. */
export function launcher(name: string, flags: string[]): string {
  const args = [
    Deno.execPath(),
    "run",
    "--quiet",
    "--no-prompt",
    `--config=${here}/deno.json`,
    ...flags,
    `${here}/cli/${name}.ts`,
  ].map(shellQuote).join(" ");
  return `#!/bin/sh\n# ${name}: launcher made by packaging/build.ts (no denort runtime was available)\nexec ${args} "$@"\n`;
}

/** Builds every binary whose entry file exists; missing entries are skipped and listed. */
export async function build(options: BuildOptions = {}): Promise<BuildResult> {
  const env = options.env ?? Deno.env.toObject();
  const out = options.out ?? `${here}/dist/bin`;
  const denort = findDenort(env);
  const mode = options.mode ?? (denort ? "compile" : "launcher");
  if (mode === "compile" && !denort) {
    throw new Error("compile mode needs DENORT_BIN or a pre-seeded denort zip in DENO_DIR");
  }
  Deno.mkdirSync(out, { recursive: true });
  const perms = permissionFlags();
  const built: string[] = [], skipped: string[] = [];
  for (const name of BINARIES) {
    const entry = `${here}/cli/${name}.ts`;
    if (!exists(entry)) {
      skipped.push(name);
      continue;
    }
    const flags = perms[name];
    if (!flags) throw new Error(`src/program/permissions.json has no entry for ${name}`);
    const target = `${out}/${name}`;
    if (mode === "compile") {
      const compileEnv: Record<string, string> = {};
      if (env.DENORT_BIN) compileEnv.DENORT_BIN = env.DENORT_BIN;
      if (env.DENO_DIR) compileEnv.DENO_DIR = env.DENO_DIR;
      const { code, stderr } = await new Deno.Command(Deno.execPath(), {
        args: [
          "compile",
          "--quiet",
          ...flags,
          ...(INCLUDES[name] ?? []).flatMap((p) => ["--include", `${here}/${p}`]),
          "--output",
          target,
          entry,
        ],
        env: compileEnv,
        cwd: here,
        stdout: "inherit",
        stderr: "piped",
      }).output();
      if (code !== 0) {
        throw new Error(`deno compile ${name} failed:\n${new TextDecoder().decode(stderr)}`);
      }
    } else {
      const tmp = `${target}.tmp-${Deno.pid}`;
      Deno.writeTextFileSync(tmp, launcher(name, flags), { mode: 0o755 });
      Deno.chmodSync(tmp, 0o755);
      Deno.renameSync(tmp, target);
    }
    built.push(name);
  }
  // The bundle runTsh binds into every sandbox; runTsh reuses it while it is newer than the
  // sources, so a built dist/ needs no bundler at run time.
  let bundle: string | undefined;
  if (exists(`${here}/cli/tsh.ts`)) {
    const parent = out.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";
    bundle = await tshBundle({ out: options.bundle ?? `${parent}/tsh/tsh.js`, force: true });
    built.push("tsh.js");
  } else skipped.push("tsh.js");
  if (exists(`${here}/cli/agent.sh`)) {
    Deno.copyFileSync(`${here}/cli/agent.sh`, `${out}/agent.sh`);
    Deno.chmodSync(`${out}/agent.sh`, 0o755);
    built.push("agent.sh");
  } else skipped.push("agent.sh");
  const single = options.single === false
    ? undefined
    : await buildSingle({ out: options.single ?? SINGLE, programs: programs() });
  return { mode, out, built, skipped, bundle, single };
}

if (import.meta.main) {
  const args = [...Deno.args];
  const take = (flag: string) => {
    const i = args.indexOf(flag);
    return i < 0 ? undefined : args.splice(i, 2)[1];
  };
  const out = take("--out");
  const mode = take("--mode") as BuildOptions["mode"];
  if (args.length || (mode && mode !== "compile" && mode !== "launcher")) {
    console.error("usage: deno task build [--out DIR] [--mode compile|launcher]");
    Deno.exit(2);
  }
  const r = await build({ out, mode });
  console.log(
    `${r.mode}: ${r.built.join(" ")} -> ${r.out}${r.bundle ? ` (tsh.js: ${r.bundle})` : ""}`,
  );
  if (r.single) {
    const s = r.single;
    console.log(
      `single file: ${s.path} (${(s.size / 1048576).toFixed(1)} MiB, sha256 ${
        s.hash.slice(0, 12)
      }…; ` +
        `programs: ${s.names.join(" ")})`,
    );
  }
  if (r.skipped.length) console.log(`skipped (no entry file): ${r.skipped.join(" ")}`);
}
