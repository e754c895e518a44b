/** The one bubblewrap profile builder: a pure transform from (command, view) to a bwrap argv. */
import { CtxError, ignore } from "../abi/errno.ts";
import { effectiveRlimits, type Rlimits } from "../abi/rlimit.ts";

/** One extra bind mount. */
export interface Bind {
  /** Host path. */
  src: string;
  /** Path inside the sandbox. */
  dst: string;
  /** `ro` or `rw`. */
  mode: "ro" | "rw";
}

/** What the host offers to the sandbox (see {@link hostLayout}): system dirs and /etc entries. */
export interface HostLayout {
  /** Top-level names that are symlinks on the host (`bin -> usr/bin` on merged-/usr systems). */
  links: Record<string, string>;
  /** Top-level system directories bound read-only (`usr`, and `bin`/`lib` when they are real dirs). */
  dirs: string[];
  /** `/etc` entries that exist on the host and are safe to show (never passwd, shadow, profile). */
  etc: string[];
}

/** Everything the profile needs: identity, the view's mounts, the environment and the command. */
export interface SandboxSpec {
  /** Host path of the /ctx tree (the mount, or a storage generation), bound read-only. */
  ctx: string;
  /**
   * Host directory bound at /workspace (the default start directory): a path, or an open fd
   * (O_PATH) bound as the very directory it names, never a path resolved again.
   */
  workspace: string | { fd: number };
  /** Mode of /workspace; default `rw` (a `mount` line targeting /workspace may say `ro`). */
  workspaceMode?: "ro" | "rw";
  /** Host directory backing HOME=/home/agent (`home/<uid>/agent/<name>`). */
  home: string;
  /** Agent uid, gid and supplementary groups. */
  uid: number;
  gid: number;
  groups?: number[];
  /** Login name for the synthetic passwd entry; default `agent`. */
  user?: string;
  /** True only when policy grants `network:default connect`. */
  network: boolean;
  /** The process environment inside, exactly (built from empty). */
  env: Record<string, string>;
  /** The agent's `mount` binds (see mounts.ts), applied after /workspace, under .git protection. */
  mounts?: Bind[];
  /** Runtime binds, applied last so nothing covers them (the deno binary and the tsh bundle). */
  binds?: Bind[];
  /** The agent's `root`: a host directory bound read-write at `/` beneath every standard bind. */
  root?: string;
  /** Start directory inside; default `/workspace` (checked against the view by mounts.ts). */
  cwd?: string;
  /** Open fds (O_PATH) bound read-only over the workspace: its `.git` and nested ones. */
  protect?: { fd: number; dst: string }[];
  /** Sandbox paths covered by an empty read-only tmpfs, after every bind but the runtime's. */
  masks?: string[];
  /** Resource limits below the defaults (the agent's `rlimit` control); the defaults always hold. */
  rlimit?: Partial<Rlimits>;
  /**
   * Processes the command may use beyond `nproc` (default 0): tsh's own threads, which must not
   * fail when a tool reaches the limit. tsh runs its tools under exactly `nproc` (`--nproc`).
   */
  nprocHeadroom?: number;
  /** argv of the command to run inside. */
  command: string[];
}

/** Options for {@link profile}. */
export interface ProfileOptions {
  /** Host directory holding the synthetic `passwd` and `group` written by the launcher. */
  dataDir: string;
  /** The host layout; tests may pass a fixed one. */
  layout: HostLayout;
  /** Kill the sandbox when the launching thread exits (default true; wrong for long-lived services). */
  dieWithParent?: boolean;
  /** setsid inside (default true; a PTY session must pass false to keep its controlling tty). */
  newSession?: boolean;
}

/** A built profile: the bwrap arguments (before `--`), the command, and the data files to write. */
export interface Profile {
  /** bwrap arguments, not including the gate fds or the command. */
  args: string[];
  /** The command run inside. */
  command: string[];
  /** Files the launcher writes under dataDir before spawning: name -> content. */
  data: Record<string, string>;
  /**
   * The `--setenv NAME VALUE` words, kept off `args`: an agent's `env` holds secrets, and an argv
   * is readable by every local user in /proc/<pid>/cmdline. The launcher hands them to bwrap
   * through an fd (`--args`, after `args`' `--clearenv`; src/sandbox/launch.ts `envFd`).
   */
  env: string[];
  /**
   * Host fds bwrap is handed (`--bind-fd <n>`), at their own numbers: the launcher's spawn must
   * pass each one open at that number (src/sandbox/launch.ts `inheriting`, `gate`).
   */
  fds: number[];
}

/**
 * Bytes each writable tmpfs of a sandbox may hold (bwrap `--size`). Their pages are shared memory,
 * counted by no rlimit: this is a run's bound on them (spec/sandbox.md "Limits"). /tmp holds
 * tsh's DENO_DIR cache too.
 */
export const TMPFS = {
  "/tmp": 512 * 1024 * 1024,
  "/run": 16 * 1024 * 1024,
  "/dev/shm": 64 * 1024 * 1024,
} as const;

const SAFE_ETC = [
  "alternatives",
  "ca-certificates",
  "ca-certificates.conf",
  "host.conf",
  "hosts",
  "inputrc",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "localtime",
  "mime.types",
  "nsswitch.conf",
  "protocols",
  "services",
  "ssl",
];
const NET_ETC = ["gai.conf", "resolv.conf"];

/** Reads which system dirs and /etc entries this host has (the only impure part of profiling). */
export function hostLayout(): HostLayout {
  const links: Record<string, string> = {};
  const dirs: string[] = [];
  for (const name of ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"]) {
    try {
      const st = Deno.lstatSync(`/${name}`);
      if (st.isSymlink) links[name] = Deno.readLinkSync(`/${name}`);
      else if (st.isDirectory) dirs.push(name);
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* absent on this host */
    }
  }
  const etc = [...SAFE_ETC, ...NET_ETC].filter((e) => {
    try {
      Deno.statSync(`/etc/${e}`);
      return true;
    } catch (e) {
      ignore(e, Deno.errors.NotFound);
      return false;
    }
  });
  return { links, dirs, etc };
}

function absolute(p: string, what: string): string {
  if (!p.startsWith("/") || p.includes("\0") || p.split("/").includes("..")) {
    throw new CtxError("EINVAL", `sandbox ${what} must be an absolute path without "..": "${p}"`);
  }
  return p;
}

/** The synthetic passwd/group: the agent and nobody, nothing of the host's accounts. */
function accounts(spec: SandboxSpec): Record<string, string> {
  const user = spec.user ?? "agent";
  const extra = (spec.groups ?? []).filter((g) => g !== spec.gid && g !== 65534);
  return {
    passwd: `${user}:x:${spec.uid}:${spec.gid}:CortexFS agent:/home/agent:/bin/bash\n` +
      `nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `${user}:x:${spec.gid}:\n` + extra.map((g) => `g${g}:x:${g}:${user}\n`).join("") +
      `nogroup:x:65534:\n`,
  };
}

/**
 * The command behind `prlimit`, which lowers its own limits and execs it (environment untouched).
 * They are set inside the sandbox, after bwrap made its user namespace: there RLIMIT_NPROC counts
 * only the sandbox's own processes (per user namespace, Linux >= 5.14), where set outside it would
 * count every process of the uid. Soft and hard together, so nothing inside can raise them again.
 */
function limited(spec: SandboxSpec): string[] {
  const r = effectiveRlimits(spec.rlimit);
  return [
    "/usr/bin/prlimit",
    `--nproc=${r.nproc + (spec.nprocHeadroom ?? 0)}`,
    `--data=${r.data * 1024 * 1024}`,
    `--cpu=${r.cpu}`,
    `--nofile=${r.nofile}`,
    "--",
    ...spec.command,
  ];
}

/**
 * Builds the bwrap profile: user, pid, ipc, uts, cgroup and (unless granted) network namespaces;
 * the agent's root (if any) beneath everything; system dirs read-only; /ctx read-only; HOME and
 * /workspace read-write; the agent's mounts; `.git` read-only on top; the runtime binds last; an
 * environment of exactly `spec.env`. Fails closed (EINVAL) on a path it cannot express.
 */
export function profile(spec: SandboxSpec, options: ProfileOptions): Profile {
  const { layout } = options;
  const a: string[] = ["--unshare-all", "--unshare-user"];
  if (spec.network) a.push("--share-net");
  if (options.dieWithParent ?? true) a.push("--die-with-parent");
  if (options.newSession ?? true) a.push("--new-session");
  a.push("--uid", String(spec.uid), "--gid", String(spec.gid), "--hostname", "cortexfs");
  // The chroot base first: every standard bind lands on top of it.
  if (spec.root) a.push("--bind", absolute(spec.root, "root"), "/");
  for (const d of layout.dirs) a.push("--ro-bind", `/${d}`, `/${d}`);
  for (const [name, target] of Object.entries(layout.links)) {
    a.push("--symlink", target, `/${name}`);
  }
  for (const e of layout.etc) {
    if (NET_ETC.includes(e) && !spec.network) continue;
    a.push("--ro-bind", `/etc/${e}`, `/etc/${e}`);
  }
  const dataDir = absolute(options.dataDir, "data dir");
  a.push("--ro-bind", `${dataDir}/passwd`, "/etc/passwd");
  a.push("--ro-bind", `${dataDir}/group`, "/etc/group");
  // Every writable tmpfs has a size (unsized, each could take half of RAM, outside RLIMIT_DATA):
  // /tmp, /run and /dev/shm (POSIX shm) as TMPFS says; /dev itself (bwrap's own tmpfs, which
  // --size cannot reach) is remounted read-only once /dev/shm is mounted on it (the device nodes
  // and /dev/pts are mounts of their own and stay usable).
  a.push("--proc", "/proc", "--dev", "/dev");
  a.push("--size", String(TMPFS["/dev/shm"]), "--tmpfs", "/dev/shm", "--remount-ro", "/dev");
  a.push("--size", String(TMPFS["/tmp"]), "--tmpfs", "/tmp");
  a.push("--size", String(TMPFS["/run"]), "--tmpfs", "/run");
  a.push("--ro-bind", absolute(spec.ctx, "ctx root"), "/ctx");
  a.push("--bind", absolute(spec.home, "home"), "/home/agent");
  const fds: number[] = [];
  const fd = (host: number) => {
    if (!Number.isInteger(host) || host <= 2) {
      throw new CtxError("EINVAL", `sandbox fd ${host} is not an fd above 2`);
    }
    fds.push(host);
    return String(host);
  };
  const ro = spec.workspaceMode === "ro";
  if (typeof spec.workspace === "string") {
    a.push(ro ? "--ro-bind" : "--bind", absolute(spec.workspace, "workspace"), "/workspace");
  } else a.push(ro ? "--ro-bind-fd" : "--bind-fd", fd(spec.workspace.fd), "/workspace");
  const bind = (b: Bind) =>
    a.push(
      b.mode === "rw" ? "--bind" : "--ro-bind",
      absolute(b.src, "bind"),
      absolute(b.dst, "bind"),
    );
  for (const b of spec.mounts ?? []) bind(b);
  // Protected paths stay read-only under the writable root (codex-rs habit; a seed design test),
  // bound after the agent's mounts so none of them can cover the protection. Each is an fd: what
  // the host checked is what is bound, whatever the sandbox renames meanwhile.
  for (const p of spec.protect ?? []) a.push("--ro-bind-fd", fd(p.fd), absolute(p.dst, "protect"));
  for (const m of spec.masks ?? []) {
    a.push("--tmpfs", absolute(m, "mask"), "--remount-ro", m);
  }
  for (const b of spec.binds ?? []) bind(b);
  a.push("--chdir", absolute(spec.cwd ?? "/workspace", "cwd"), "--cap-drop", "ALL", "--clearenv");
  const env: string[] = [];
  for (const [k, v] of Object.entries(spec.env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || v.includes("\0")) {
      throw new CtxError("EINVAL", `sandbox environment entry "${k}" is not a valid variable`);
    }
    env.push("--setenv", k, v);
  }
  if (spec.command.length === 0) throw new CtxError("EINVAL", "sandbox command is empty");
  return { args: a, command: limited(spec), data: accounts(spec), fds, env };
}
