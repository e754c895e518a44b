/** Runs the real `ctx` (cli/ctx.ts on the pinned deno) as a child process with an explicit env. */
const CLI = new URL("../../cli/ctx.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** A finished ctx run. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options for {@link ctx}. */
export interface CtxRun {
  /** The child's whole environment (nothing is inherited but PATH and HOME). */
  env?: Record<string, string>;
  /** Run as this uid/gid (65534 = nobody) through setpriv; needs {@link nobodyDenoDir}. */
  as?: number;
  /** Bytes for stdin. */
  stdin?: string;
}

/** The argv prefix that runs ctx (optionally as another uid through setpriv). */
export function ctxArgv(options: CtxRun = {}): string[] {
  const deno = [Deno.execPath(), "run", "-A", "--quiet", `--config=${CONFIG}`, CLI];
  if (options.as === undefined) return deno;
  const id = String(options.as);
  return ["setpriv", `--reuid=${id}`, `--regid=${id}`, "--clear-groups", ...deno];
}

/** Runs `ctx ARGS...` to completion. */
export async function ctx(args: string[], options: CtxRun = {}): Promise<Ran> {
  const [cmd, ...rest] = ctxArgv(options);
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    NO_COLOR: "1",
    ...options.env,
  };
  const child = new Deno.Command(cmd, {
    args: [...rest, ...args],
    env,
    clearEnv: true,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/**
 * A DENO_DIR another uid can use: a private copy of the npm packages ctx needs (the root's cache
 * is not readable by them). The caller removes it.
 */
export function nobodyDenoDir(uid = 65534): string {
  const src = `${Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache/deno`}`;
  const dir = Deno.makeTempDirSync({ prefix: "ctx-nobody-deno-" });
  const cp = new Deno.Command("cp", { args: ["-a", `${src}/npm`, `${dir}/npm`] }).outputSync();
  if (!cp.success) throw new Error(`cp npm cache failed: ${new TextDecoder().decode(cp.stderr)}`);
  new Deno.Command("chown", { args: ["-R", `${uid}:${uid}`, dir] }).outputSync();
  Deno.chmodSync(dir, 0o755);
  return dir;
}

/** Makes a temp dir that other uids can traverse (tests chmod it 0755). */
export async function openTempDir(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  await Deno.chmod(dir, 0o755);
  return dir;
}
