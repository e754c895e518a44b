/** Where the running program comes from: a checkout (its cli/*.ts) or the built single file. */
import permissions from "./permissions.json" with { type: "json" };
import { ignore } from "../abi/errno.ts";

/** The running install, as {@link self} finds it. */
export type Self =
  | {
    kind: "checkout";
    checkout: string;
    /** The programs with an entry file (`cli/<name>.ts`) among the keys of permissions.json. */
    programs: string[];
  }
  | {
    kind: "built";
    /** The built file's real path (`CORTEXFS_SELF`, from its header, resolved), if said. */
    exe?: string;
    /** The unpacked payload: the pinned deno and one `<program>.js` bundle per program. */
    lib: string;
    /** The programs the file carries (the keys of permissions.json with a bundle in `lib`). */
    programs: string[];
  };

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory);
    return false;
  }
}

/**
 * The install a module at `url` (default: this one) belongs to: from source, `url` is a file of the checkout
 * (`<checkout>/src/program/self.ts`); in the built file every module is inside `<lib>/<program>.js`
 * and the header exported the path it was started by as CORTEXFS_SELF (absolute, perhaps a
 * program's symlink: resolved here, so that `exe` is the file itself).
 */
export function self(env: Record<string, string | undefined>, url = import.meta.url): Self {
  const path = new URL(url).pathname;
  if (path.endsWith(".ts")) {
    const checkout = new URL("../..", url).pathname.replace(/\/$/, "");
    const programs = Object.keys(permissions).filter((n) => isFile(`${checkout}/cli/${n}.ts`));
    return { kind: "checkout", checkout, programs };
  }
  const lib = new URL(".", url).pathname.replace(/\/$/, "");
  const programs = Object.keys(permissions).filter((n) => isFile(`${lib}/${n}.js`));
  return { kind: "built", exe: real(env.CORTEXFS_SELF), lib, programs };
}

/** `path` with its symlinks resolved; as given when it cannot be (gone since); undefined for none. */
function real(path: string | undefined): string | undefined {
  if (!path) return undefined;
  try {
    return Deno.realPathSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return path;
  }
}

/**
 * The `deno run` flags every program of the built file starts with, before its own permission
 * set: no prompt, and nothing looked up from the caller's directory or the network (the bundle
 * carries its npm dependencies; a deno.json where the user stands must not change it). A dynamic
 * import loads its chunk when it runs, not at start (as the checkout's deno.json asks too: Deno
 * otherwise reads and parses every chunk a program might import before it starts).
 */
export const BUILT_RUN = [
  "run",
  "--quiet",
  "--no-prompt",
  "--no-config",
  "--no-lock",
  "--no-remote",
  "--no-npm",
  "--unstable-lazy-dynamic-imports",
] as const;

/**
 * The argv that starts program `name` of this install with its own permission set
 * (permissions.json beside this file): the pinned deno on the checkout's `cli/<name>.ts`, or on the
 * built file's `<lib>/<name>.js`. The one way for a program to start another (or itself again,
 * e.g. a per-agent instance of cortexfsd).
 */
export function programArgv(install: Self, name: string, args: readonly string[] = []): string[] {
  const flags = (permissions as Record<string, string[]>)[name];
  if (!flags || !install.programs.includes(name)) {
    throw new Error(`no program "${name}" here (there are: ${install.programs.join(", ")})`);
  }
  if (install.kind === "built") {
    return [`${install.lib}/deno`, ...BUILT_RUN, ...flags, `${install.lib}/${name}.js`, ...args];
  }
  return [
    Deno.execPath(),
    "run",
    "--quiet",
    "--no-prompt",
    `--config=${install.checkout}/deno.json`,
    ...flags,
    `${install.checkout}/cli/${name}.ts`,
    ...args,
  ];
}
