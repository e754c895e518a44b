/** `cortexfs install`: the built file copied into a bin directory, its program symlinks, a unit. */
import { CtxError, ignore } from "../abi/errno.ts";
import { tempName } from "../abi/names.ts";

/** Options for {@link install}. */
export interface InstallOptions {
  /** The built file to install (the running one). */
  exe: string;
  /** The program names to link to it (`ctx`, `tsh`, `cortexfsd`, ...). */
  programs: readonly string[];
  /** Files copied into the prefix as they are, by name (agent.sh). */
  files?: { name: string; src: string }[];
  /** The bin directory: `<prefix>/cortexfs` and one symlink per program go there. */
  prefix: string;
  /** Also write a systemd unit for cortexfsd into `unitDir` (never enabled or started here). */
  service?: boolean;
  /** Where the unit goes; default `/etc/systemd/system`. */
  unitDir?: string;
}

/** What {@link install} did, one line per file. */
export interface InstallReport {
  lines: string[];
}

function lstat(path: string): Deno.FileInfo | null {
  try {
    return Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

function real(path: string): string | null {
  try {
    return Deno.realPathSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return null;
  }
}

/** True when `a` and `b` hold the same bytes. */
function same(a: string, b: string): boolean {
  try {
    const x = Deno.readFileSync(a), y = Deno.readFileSync(b);
    return x.length === y.length && x.every((v, i) => v === y[i]);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/** A temp name beside `path` for an atomic replace (the project's one temp-name form). */
function beside(path: string): string {
  const i = path.lastIndexOf("/");
  return `${path.slice(0, i + 1)}${tempName(path.slice(i + 1))}`;
}

/** Replaces `path` by a symlink to `target` through a temp name and a rename (atomic). */
function link(target: string, path: string): void {
  const tmp = beside(path);
  Deno.symlinkSync(target, tmp);
  Deno.renameSync(tmp, path);
}

/** The systemd unit of cortexfsd for a bin directory (see packaging/README.md). */
export function unit(prefix: string): string {
  return `[Unit]
Description=CortexFS: the /ctx agent runtime (cortexfsd)
After=local-fs.target

[Service]
Type=simple
# The built file unpacks once per version here; users' ctx reuse this root-owned copy.
Environment=CORTEXFS_CACHE=/var/cache/cortexfs
# The restart boundary: bring the storage tree to this version, drop old generations, serve.
ExecStartPre=${prefix}/ctx storage update --prune
ExecStart=${prefix}/cortexfsd
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure

[Install]
WantedBy=multi-user.target
`;
}

/**
 * Installs the built file as `<prefix>/cortexfs` (a copy through a temp file and a rename,
 * unless it already is that file) and makes `<prefix>/<program>` a symlink to it for every
 * program. An existing file of such a name that is not a symlink is left alone: refused, EEXIST.
 */
export function install(options: InstallOptions): InstallReport {
  const lines: string[] = [];
  const { prefix } = options;
  Deno.mkdirSync(prefix, { recursive: true, mode: 0o755 });
  for (const name of options.programs) {
    const st = lstat(`${prefix}/${name}`);
    if (st && !st.isSymlink) {
      throw new CtxError("EEXIST", `is not a symlink; remove it to install ${name} here`, {
        path: `${prefix}/${name}`,
      });
    }
  }
  for (const f of options.files ?? []) {
    const path = `${prefix}/${f.name}`;
    if (lstat(path) && !same(path, f.src)) {
      throw new CtxError("EEXIST", `is not this install's ${f.name}; remove it to install here`, {
        path,
      });
    }
  }
  const dest = `${prefix}/cortexfs`;
  if (real(dest) !== real(options.exe)) {
    const tmp = beside(dest);
    Deno.copyFileSync(options.exe, tmp);
    Deno.chmodSync(tmp, 0o755);
    Deno.renameSync(tmp, dest);
    lines.push(`${dest} (copy of ${options.exe})`);
  } else lines.push(`${dest} (already this file)`);
  for (const name of options.programs) {
    link("cortexfs", `${prefix}/${name}`);
    lines.push(`${prefix}/${name} -> cortexfs`);
  }
  for (const f of options.files ?? []) {
    const path = `${prefix}/${f.name}`, tmp = beside(path);
    Deno.copyFileSync(f.src, tmp);
    Deno.chmodSync(tmp, 0o755);
    Deno.renameSync(tmp, path);
    lines.push(`${path}`);
  }
  if (options.service) {
    const dir = options.unitDir ?? "/etc/systemd/system";
    Deno.mkdirSync(dir, { recursive: true, mode: 0o755 });
    const path = `${dir}/cortexfsd.service`;
    const tmp = beside(path);
    Deno.writeTextFileSync(tmp, unit(prefix), { mode: 0o644 });
    Deno.chmodSync(tmp, 0o644);
    Deno.renameSync(tmp, path);
    lines.push(`${path} (written, not started: systemctl enable --now cortexfsd)`);
  }
  return { lines };
}
