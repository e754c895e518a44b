/**
 * The single downloadable file `dist/cortexfs-<version>-linux-x86_64`: a POSIX sh header and a
 * gzip tar payload (the pinned deno binary, one `deno bundle` per program, the mount's worker).
 * The header checks the payload's SHA-256, unpacks it once into a cache directory named after
 * that hash, and runs the program named by argv[0] or by its first argument.
 */
import { tempName } from "../src/abi/names.ts";
import { BUILT_RUN } from "../src/program/self.ts";

const here = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** Modules a program starts as Workers (`deno bundle` does not follow `new Worker(URL)`). */
export const WORKERS: Record<string, { entry: string; out: string }[]> = {
  // the mount's own thread (src/fuse/thread.ts looks for worker.js beside its bundle)
  cortexfsd: [{ entry: "src/fuse/worker.ts", out: "worker.js" }],
};

/** Programs bundled to one file each: tsh.js is also what sandboxes bind and run (src/tool/run.ts). */
export const ALONE = ["tsh"];

/** Options for {@link buildSingle}. */
export interface SingleOptions {
  /** The output file. */
  out: string;
  /** Program name -> its permission flags (src/program/permissions.json), entry `cli/<name>.ts`. */
  programs: Record<string, readonly string[]>;
  /** The deno binary to carry and to bundle with; default this one. */
  deno?: string;
}

/** What {@link buildSingle} made. */
export interface SingleResult {
  path: string;
  /** Bytes of the whole file. */
  size: number;
  /** SHA-256 of the payload (hex): the cache directory's name. */
  hash: string;
  /** Bytes of the header (the payload starts after them). */
  header: number;
  /** The programs the file answers to, besides `cortexfs` itself. */
  names: string[];
}

function q(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The sh header for a payload of SHA-256 `hash` starting at byte `skip`. */
export function header(
  options: {
    version: string;
    hash: string;
    skip: number;
    programs: Record<string, readonly string[]>;
  },
): string {
  const names = Object.keys(options.programs).filter((n) => n !== "cortexfs");
  const flags = Object.entries(options.programs)
    .map(([n, f]) => `  ${n}) set -- ${f.map(q).join(" ")} "$lib/${n}.js" "$@" ;;`)
    .join("\n");
  return `#!/bin/sh
# cortexfs ${options.version} (linux-x86_64): one file, several programs; made by packaging/single.ts.
# Run it as \`cortexfs PROGRAM ...\` or through a symlink named after a program (${
    names.join(", ")
  }).
# The payload after this header (a gzip tar: the pinned deno and the programs' bundles) is
# unpacked once into a cache directory named after its SHA-256, checked before it is used:
# \$CORTEXFS_CACHE, else /var/cache/cortexfs for root (and, read-only, for a user when root has
# unpacked this payload there), else \${XDG_CACHE_HOME:-\$HOME/.cache}/cortexfs.
set -eu
hash=${options.hash}
skip=${options.skip}
die() {
  code=$1
  shift
  echo "cortexfs: $*" >&2
  exit "$code"
}
me=$0
case $me in */*) ;; *) me=$(command -v -- "$me") || die 70 "cannot find myself ($0)" ;; esac
name=\${me##*/}
# The path this file was started by, absolute (a program's self() resolves its symlinks: no
# readlink process on every start; the first run's unpack resolves it for its messages).
case $me in /*) file=$me ;; *) file=\${PWD:-$(pwd)}/$me ;; esac
# The effective uid, as \`id -u\` prints it, without starting a process (every program start runs
# this): the second field of /proc/self/status's Uid line (this shell's own); \`id -u\` without /proc.
uid=
if [ -r /proc/self/status ]; then
  while read -r key _ eff _; do
    if [ "$key" = Uid: ]; then uid=$eff && break; fi
  done </proc/self/status
fi
[ -n "$uid" ] || uid=$(id -u)
# Each argument is a directory, not a symlink, owned by this user or root, that nobody else may
# write (one stat for them all, the one process a warm start runs before deno: no shell builtin
# reads a mode; LC_ALL=C: it loads no locale).
owned() {
  for d do [ -d "$d" ] && [ ! -L "$d" ] || return 1; done
  n=$(($# * 2))
  set -- $(LC_ALL=C stat -c '%u %a' -- "$@" 2>/dev/null)
  [ $# -eq "$n" ] || return 1
  while [ $# -gt 0 ]; do
    { [ "$1" = "$uid" ] || [ "$1" = 0 ]; } && [ $((0$2 & 022)) -eq 0 ] || return 1
    shift 2
  done
}
# Each argument (absolute) and every directory above it is owned by this user or root; the
# arguments are writable by nobody else, a directory above them by nobody else unless it is
# sticky (/tmp: no other user can move what it holds). Otherwise another user could swap what
# the path names between these checks and the exec (one stat for them all, as owned()).
trusted() {
  strict=$#
  top=$1
  while :; do
    top=\${top%/*}
    [ -n "$top" ] || break
    set -- "$top" "$@"
  done
  [ "$1" = / ] || set -- / "$@"
  loose=$(($# - strict))
  for d do [ -d "$d" ] && [ ! -L "$d" ] || return 1; done
  n=$(($# * 2))
  set -- $(LC_ALL=C stat -c '%u %a' -- "$@" 2>/dev/null)
  [ $# -eq "$n" ] || return 1
  while [ $# -gt 0 ]; do
    { [ "$1" = "$uid" ] || [ "$1" = 0 ]; } || return 1
    if [ $((0$2 & 022)) -ne 0 ]; then
      [ "$loose" -gt 0 ] && [ $((0$2 & 01000)) -ne 0 ] || return 1
    fi
    loose=$((loose - 1))
    shift 2
  done
}
# $1 is a trusted directory in a trusted directory, holding a complete, checked unpack of this payload.
sealed() {
  trusted "\${1%/*}" "$1" && [ -f "$1/.sha256" ] && IFS= read -r seal <"$1/.sha256" &&
    [ "$seal" = "$hash" ]
}
# A shared cache is readable by all (0755): root's, which every user's sandboxes bind the
# runtime from and every user may reuse. A user's own is private (0700).
# (A user on root's unpack has checked it already: the same stat again would cost a process.)
mode=0755
checked=
if [ -n "\${CORTEXFS_CACHE:-}" ]; then
  base=$CORTEXFS_CACHE
elif [ "$uid" = 0 ]; then
  base=/var/cache/cortexfs
elif sealed "/var/cache/cortexfs/$hash"; then
  base=/var/cache/cortexfs
  checked=1
else
  base=\${XDG_CACHE_HOME:-\${HOME:?cortexfs: set HOME or CORTEXFS_CACHE}/.cache}/cortexfs
  mode=0700
fi
case $base in /*) ;; *) base=\${PWD:-$(pwd)}/$base ;; esac
lib=$base/$hash
if [ -z "$checked" ] && ! sealed "$lib"; then
  if [ -e "$lib" ] || [ -L "$lib" ]; then
    die 69 "$lib is not a checked unpack of this file owned by you (or root): remove it and run again"
  fi
  mkdir -p -m "$mode" -- "$base" || die 73 "cannot create the cache directory $base"
  owned "$base" || die 69 "refusing the cache directory $base: it must be a directory (not a symlink) owned by you (or root) that nobody else may write"
  trusted "$base" || die 69 "refusing the cache directory $base: a directory above it is not owned by you (or root), or another user may write it (only a sticky one such as /tmp may be)"
  umask 022
  [ ! -t 2 ] || echo "cortexfs: first run of ${options.version}: unpacking into $lib (once)" >&2
  file=$(readlink -f -- "$file") || die 70 "cannot resolve $me"
  tmp=$(mktemp -d -- "$base/.unpack-XXXXXX") || die 73 "cannot create a directory in $base"
  trap 'rm -rf -- "$tmp"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  tail -c +$((skip + 1)) -- "$file" >"$tmp/payload" || die 74 "cannot read $file"
  sum=$(sha256sum <"$tmp/payload") || die 70 "sha256sum failed"
  sum=\${sum%% *}
  [ "$sum" = "$hash" ] || die 65 "$file is damaged: its payload's SHA-256 is $sum, not $hash; download it again"
  # 2 MiB records (-b 4096, -B: whole records from the gzip pipe): tar writes each file in
  # record-sized pieces, and deno written 10 KiB at a time (the default) sits in the page cache
  # as small folios that make every later start of it about 3 ms slower.
  tar -b 4096 -B -xzf "$tmp/payload" -C "$tmp" --no-same-owner ||
    die 74 "cannot unpack $file into $tmp"
  rm -f -- "$tmp/payload"
  chmod "$mode" -- "$tmp"
  echo "$hash" >"$tmp/.sha256"
  # Atomic: the first of two first runs renames its directory into place; the other finds it
  # there (the rename of a directory onto a non-empty one fails) and uses that one.
  if ! mv -T -- "$tmp" "$lib" 2>/dev/null; then
    sealed "$lib" || die 69 "cannot move the unpacked payload to $lib"
    rm -rf -- "$tmp"
  fi
  trap - EXIT INT TERM
  # What is executed below is what was checked: the unpack in place, in trusted directories.
  sealed "$lib" || die 69 "$lib changed after the unpack: refusing to run it"
fi
case $name in
${names.join("|")}) ;;
*) case \${1:-} in ${names.join("|")}) name=$1 && shift ;; *) name=cortexfs ;; esac ;;
esac
case $name in
${flags}
esac
CORTEXFS_SELF=$file
DENO_NO_UPDATE_CHECK=1
export CORTEXFS_SELF DENO_NO_UPDATE_CHECK
exec "$lib/deno" ${BUILT_RUN.join(" ")} "$@"
exit 70
`;
}

async function run(cmd: string, args: string[]): Promise<void> {
  const o = await new Deno.Command(cmd, { args, cwd: here, stdout: "piped", stderr: "piped" })
    .output();
  if (!o.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${new TextDecoder().decode(o.stderr)}`);
  }
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Writes `out`: the header for `programs`, then `lib` (the deno binary and `<program>.js` files)
 * as a reproducible gzip tar, through a temp file and a rename.
 */
export async function pack(
  lib: string,
  options: { out: string; programs: Record<string, readonly string[]>; version: string },
): Promise<SingleResult> {
  for (const e of Deno.readDirSync(lib)) {
    const exec = e.name === "deno" || e.name.endsWith(".sh");
    Deno.chmodSync(`${lib}/${e.name}`, exec ? 0o755 : 0o644);
  }
  const payloadPath = `${options.out}.payload-${Deno.pid}`;
  Deno.mkdirSync(options.out.replace(/\/[^/]*$/, "") || "/", { recursive: true });
  try {
    // Reproducible: sorted names, no owners, no times (tar and gzip both).
    await run("sh", [
      "-c",
      'tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$1" -cf - . | gzip -n -6 >"$2"',
      "pack",
      lib,
      payloadPath,
    ]);
    const payload = Deno.readFileSync(payloadPath);
    const hash = await sha256(payload);
    let skip = 0, text = "";
    for (let i = 0; i < 4; i++) { // the header holds its own length: settle on a fixed point
      text = header({ version: options.version, hash, skip, programs: options.programs });
      const len = new TextEncoder().encode(text).length;
      if (len === skip) break;
      skip = len;
    }
    const head = new TextEncoder().encode(text);
    if (head.length !== skip) throw new Error("the header's length did not settle");
    const at = options.out.lastIndexOf("/");
    const tmp = `${options.out.slice(0, at + 1)}${tempName(options.out.slice(at + 1))}`;
    const f = Deno.openSync(tmp, { write: true, create: true, truncate: true, mode: 0o755 });
    try {
      for (const part of [head, payload]) {
        for (let off = 0; off < part.length;) off += f.writeSync(part.subarray(off));
      }
    } finally {
      f.close();
    }
    Deno.chmodSync(tmp, 0o755);
    Deno.renameSync(tmp, options.out);
    return {
      path: options.out,
      size: head.length + payload.length,
      hash,
      header: head.length,
      names: Object.keys(options.programs).filter((n) => n !== "cortexfs"),
    };
  } finally {
    try {
      Deno.removeSync(payloadPath);
    } catch { /* any kind: a finally, maybe while the real error is on its way out */ }
  }
}

/** The `require` deno bundle gives bundled CommonJS code: node:module, loaded by every chunk. */
const EAGER_REQUIRE =
  'import { createRequire as __deno_internal_createRequire } from "node:module";\n' +
  "var __require = __deno_internal_createRequire(import.meta.url);";
/** The same `require` for node built-ins (the only modules a bundle leaves to it), made on first use. */
const LAZY_REQUIRE = "var __require = (id) => globalThis.process.getBuiltinModule(id) ?? " +
  "(() => { throw new Error(`cortexfs bundle: cannot require ${JSON.stringify(id)}`); })();";

/**
 * Makes the split bundles' shared `require` lazy. deno bundle defines it in the helper chunk every
 * entry imports, with a static import of node:module, which starts Deno's whole Node layer (about
 * half of `ctx status`'s CPU); only the CommonJS packages (commander) call it, and only for node
 * built-ins. Throws when the bundle no longer looks as expected (a new Deno).
 */
export function lazyRequire(lib: string): void {
  const shims: string[] = [];
  for (const e of Deno.readDirSync(lib)) {
    if (!e.name.endsWith(".js")) continue;
    const text = Deno.readTextFileSync(`${lib}/${e.name}`);
    if (/__require\((?!"node:)/.test(text)) {
      throw new Error(`${e.name}: requires something other than a node: built-in`);
    }
    if (!text.includes("__deno_internal_createRequire")) continue;
    if (!text.includes(EAGER_REQUIRE)) {
      throw new Error(`${e.name}: deno bundle's require shim is not the one lazyRequire knows`);
    }
    shims.push(e.name);
  }
  if (shims.length === 0) {
    throw new Error("no require shim in the bundles (did deno bundle change?)");
  }
  for (const name of shims) {
    const path = `${lib}/${name}`;
    Deno.writeTextFileSync(path, Deno.readTextFileSync(path).replace(EAGER_REQUIRE, LAZY_REQUIRE));
  }
}

/**
 * Builds the single file: bundles every program (and its workers) with the pinned deno and
 * {@link pack}s them with that deno binary.
 */
export async function buildSingle(options: SingleOptions): Promise<SingleResult> {
  const { VERSION } = await import("../src/abi/version.ts");
  const deno = options.deno ?? Deno.execPath();
  const stage = await Deno.makeTempDir({ prefix: "cortexfs-single-" });
  try {
    const lib = `${stage}/lib`;
    Deno.mkdirSync(lib);
    // Programs share their modules as chunks (code splitting: each start parses only what it
    // imports, about a third less CPU for `ctx` than one bundle per program); the entries all
    // live in cli/, so every output lands flat in lib/. A program run inside sandboxes (one file
    // bound there) and each worker are single-file bundles.
    const names = Object.keys(options.programs);
    const split = names.filter((n) => !ALONE.includes(n));
    if (split.length) {
      await run(deno, [
        "bundle",
        "--quiet",
        "--platform",
        "deno",
        "--code-splitting",
        "--outdir",
        lib,
        ...split.map((n) => `cli/${n}.ts`),
      ]);
      lazyRequire(lib);
    }
    const bundles: { entry: string; out: string }[] = [];
    for (const name of names) {
      if (ALONE.includes(name)) bundles.push({ entry: `cli/${name}.ts`, out: `${name}.js` });
      bundles.push(...(WORKERS[name] ?? []));
    }
    for (const b of bundles) {
      await run(deno, [
        "bundle",
        "--quiet",
        "--platform",
        "deno",
        "-o",
        `${lib}/${b.out}`,
        b.entry,
      ]);
    }
    Deno.copyFileSync(deno, `${lib}/deno`);
    // agent.sh, the default human entry (DESIGN.md): `cortexfs install` puts it beside ctx.
    try {
      Deno.copyFileSync(`${here}/cli/agent.sh`, `${lib}/agent.sh`);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    return await pack(lib, { out: options.out, programs: options.programs, version: VERSION });
  } finally {
    await Deno.remove(stage, { recursive: true });
  }
}
