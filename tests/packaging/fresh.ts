/**
 * Helpers for tests of the built single file: build it once into a temp dir, and run it as on a
 * fresh machine: `env -i` with an empty HOME, in a mount namespace where the checkout, the pinned
 * deno and Deno's cache are hidden under empty tmpfs mounts, in a network namespace with no
 * network at all.
 */
import { buildSingle } from "../../packaging/single.ts";
import { programs } from "../../packaging/build.ts";
import { VERSION } from "../../src/abi/version.ts";
import { exists, REPO } from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

/** The file name a download has. */
export const NAME = `cortexfs-${VERSION}-linux-x86_64`;

let made: Promise<string> | undefined;

/** Builds the single file (once per test process) into a temp dir; its path. */
export function builtFile(): Promise<string> {
  return made ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "cortexfs-dist-" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    return (await buildSingle({ out: `${dir}/${NAME}`, programs: programs() })).path;
  })();
}

/** What a fresh machine does not have: this checkout, the pinned deno's package, Deno's caches. */
export function hidden(): string[] {
  const deno = Deno.execPath().replace(/\/[^/]*$/, "");
  const home = Deno.env.get("HOME") ?? "/root";
  const dirs = [REPO, deno, Deno.env.get("DENO_DIR") ?? `${home}/.cache/deno`];
  // Only existing directories can be covered; a path inside another one is covered with it.
  return [...new Set(dirs)].filter((d) =>
    exists(d, { follow: true }) && !dirs.some((o) => o !== d && d.startsWith(`${o}/`))
  );
}

/** Options for {@link fresh}. */
export interface FreshOptions {
  /** `[src, dst]`: host directory `src` appears at `dst` (e.g. a temp dir as /var/cache). */
  binds?: [string, string][];
  /** More directories to cover with an empty tmpfs (e.g. /usr/local/bin, /run). */
  tmpfs?: string[];
}

/**
 * The argv prefix that runs a command in a new mount and network namespace with {@link hidden}
 * (and `options.tmpfs`, and /var/cache unless bound) covered by empty tmpfs mounts and
 * `options.binds` bound; every pid stays
 * the same (unshare, sh and env all exec), so {@link inside} can join it.
 */
export function fresh(options: FreshOptions = {}): string[] {
  // Root's first run unpacks into /var/cache/cortexfs: never the host's.
  const cache = (options.binds ?? []).some(([, dst]) => dst === "/var/cache") ? [] : ["/var/cache"];
  return [
    "unshare",
    "--mount",
    "--net",
    "--propagation",
    "private",
    "sh",
    "-c",
    `while [ "$1" != -- ]; do
  if [ "$1" = B ]; then mount --bind "$2" "$3" || exit 71; shift 3
  else mount -t tmpfs -o mode=0755 hidden "$2" || exit 71; shift 2; fi
done
shift
exec "$@"`,
    "fresh",
    ...[...hidden(), ...cache, ...(options.tmpfs ?? [])].flatMap((d) => ["T", d]),
    ...(options.binds ?? []).flatMap(([src, dst]) => ["B", src, dst]),
    "--",
  ];
}

/**
 * The argv prefix that runs a command inside the namespaces of process `pid` (see {@link fresh}),
 * in `cwd` when given: entering a mount namespace moves the process to its root, so without it
 * the command runs in `/` (a terminal's workspace would be the whole machine).
 */
export function inside(pid: number, cwd?: string): string[] {
  return ["nsenter", "-t", String(pid), "-m", "-n", ...(cwd ? [`--wdns=${cwd}`] : []), "--"];
}

/** A clean environment: only HOME and a system PATH (plus `extra`), as `env -i` argv. */
export function clean(home: string, extra: Record<string, string> = {}): string[] {
  return [
    "env",
    "-i",
    `HOME=${home}`,
    "PATH=/usr/bin:/bin",
    ...Object.entries(extra).map(([k, v]) => `${k}=${v}`),
  ];
}

/** A long-running process whose stderr is collected; {@link Started.waitFor} waits for a line. */
export interface Started {
  child: Deno.ChildProcess;
  log(): string;
  /** Resolves once stderr contains `text`; rejects if the process ends first. */
  waitFor(text: string): Promise<void>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number>;
}

/** Starts argv (stdout discarded, stderr collected). */
export function start(argv: string[], options: { cwd?: string } = {}): Started {
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    cwd: options.cwd,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "", over = false;
  const waiters: { text: string; ok: () => void; no: (e: Error) => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (log.includes(w.text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.ok();
      }
    }
  };
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) {
      log += dec.decode(chunk, { stream: true });
      check();
    }
    over = true;
    for (const w of waiters.splice(0)) w.no(new Error(`ended before "${w.text}":\n${log}`));
  })();
  let stopped: Promise<number> | undefined;
  return {
    child,
    log: () => log,
    waitFor: (text) =>
      new Promise((ok, no) => {
        if (log.includes(text)) return ok();
        if (over) return no(new Error(`ended before "${text}":\n${log}`));
        waiters.push({ text, ok, no });
      }),
    stop: () =>
      stopped ??= (async () => {
        try {
          child.kill("SIGTERM");
        } catch (e) {
          ignore(e, TypeError); /* already gone */
        }
        const s = await child.status;
        await pump;
        return s.code;
      })(),
  };
}

/** The `sh` blocks under README's heading `title`, each as its command lines (comments dropped). */
export function readmeBlocks(title: string): string[][] {
  const text = Deno.readTextFileSync(`${REPO}/README.md`);
  const at = text.indexOf(`\n## ${title}\n`);
  if (at < 0) throw new Error(`README has no section "${title}"`);
  const section = text.slice(at + 1).split(/\n## /)[0];
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    m[1].split("\n").map((l) => l.replace(/\s{2,}#.*$/, "").trimEnd()).filter((l) => l !== "")
  );
}
