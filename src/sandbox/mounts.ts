/** The agent's view controls for the sandbox: `mount` lines as binds, `/workspace` replacement, `root` and `cwd`. */
import { CtxError, ignore } from "../abi/errno.ts";
import type { MountEntry } from "../abi/mount.ts";
import type { Bind, HostLayout } from "./profile.ts";

/** What {@link planView} needs: the standard binds, the controls, and the host layout. */
export interface ViewInput {
  /** Host path of the /ctx tree (the mount or a storage generation). */
  ctx: string;
  /** Host directory backing /home/agent. */
  home: string;
  /** The FUSE mount projecting the tree (production `/ctx`, `--dev`'s own path): never a `rw` source. */
  fuse?: string;
  /** The default workspace: the calling client's cwd (host path). */
  workspace: string;
  /** The `mount` control (parsed). */
  mount: readonly MountEntry[];
  /** The `root` control: a view path under /ctx or a host path; absent = no base layer. */
  root?: string;
  /** The `cwd` control: the start directory inside the sandbox. */
  cwd: string;
  /** System directories the profile binds (for the cwd check). */
  layout: HostLayout;
}

/** Host facts the plan depends on; tests may replace `submounts`. */
export interface HostFacts {
  /** True when some mount lies strictly below `path`; null when that cannot be told. */
  submounts(path: string): boolean | null;
}

/** The plan: what {@link profile} gets for the workspace, the agent mounts, root and cwd. */
export interface ViewPlan {
  /** Host directory bound at /workspace. */
  workspace: string;
  /** Its mode: `rw` unless a `mount` line targeting /workspace says `ro`. */
  workspaceMode: "ro" | "rw";
  /** Extra binds from `mount`, parents before children. */
  mounts: Bind[];
  /** Host directory bound read-write at `/` beneath every standard bind. */
  root?: string;
  /** Start directory inside the sandbox. */
  cwd: string;
}

/** Paths the runtime owns: no mount line may target them, anything below them, or an ancestor. */
const OWNED_TREES = ["/ctx", "/opt/cortexfs", "/proc", "/dev"];
/** Exact paths the runtime owns (their children may be mount targets). */
const OWNED_EXACT = ["/", "/home/agent", "/etc/passwd", "/etc/group"];
/** Paths whose ancestors may not be targets: a bind there would cover them. */
const ANCHORS = ["/ctx", "/home/agent", "/workspace", "/opt/cortexfs", "/proc", "/dev"];
/** Tree subtrees that hold data; everything else in the tree is the control plane. */
const DATA = ["home", "shared"];

const under = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : dir + "/");

/** Every mount point of this process's view (/proc/self/mountinfo), or null when unreadable. */
export function mountPoints(): string[] | null {
  let text: string;
  try {
    text = Deno.readTextFileSync("/proc/self/mountinfo");
  } catch (e) {
    ignore(e, Deno.errors.NotCapable, Deno.errors.NotFound);
    return null; // Deno refuses /proc reads without --allow-all
  }
  const unescape = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
  return text.split("\n").map((line) => line.split(" ")[4]).filter((p) => p !== undefined)
    .map(unescape);
}

/** Reads /proc/self/mountinfo: are there mount points strictly below `path`? */
export function procSubmounts(path: string): boolean | null {
  const points = mountPoints();
  if (points === null) return null; // unknown, so fail closed
  return points.some((p) => p.startsWith(path.replace(/\/$/, "") + "/"));
}

/**
 * The mount point's canonical path. Its parent is resolved, never the mount itself (a stat of the
 * mount root would be a FUSE request): a mount point is a directory, not a symlink, in any case.
 */
function realMount(m: string): string {
  const i = m.lastIndexOf("/");
  if (i <= 0) return m;
  try {
    return `${Deno.realPathSync(m.slice(0, i))}${m.slice(i)}`;
  } catch (e) {
    ignore(
      e,
      Deno.errors.NotFound,
      Deno.errors.NotADirectory,
      Deno.errors.PermissionDenied,
      Deno.errors.NotCapable,
    );
    return m;
  }
}

const realFacts: HostFacts = { submounts: procSubmounts };

/** Maps a view path under /ctx onto the tree; any other absolute path is a host path. */
function hostOf(p: string, ctx: string): string {
  if (p === "/ctx") return ctx;
  if (p.startsWith("/ctx/")) return ctx + p.slice(4);
  return p;
}

/** The real path of an existing source, or ENOENT naming the control that named it. */
function realSource(p: string, ctx: string, what: string): string {
  try {
    return Deno.realPathSync(hostOf(p, ctx));
  } catch {
    throw new CtxError("ENOENT", `${what}: source "${p}" does not exist`);
  }
}

/** Refuses a writable bind of the tree's control plane: the agent could rewrite its own authority. */
function checkWritable(
  real: string,
  ctxReal: string,
  what: string,
  shown: string,
  mount?: string,
): void {
  // The source is canonical (realpath as the agent identity): a symlink that reaches the mount,
  // or the mount's own path, lands here as a path under it.
  if (mount !== undefined && mount !== ctxReal && under(real, mount)) {
    throw new CtxError(
      "EACCES",
      `${what}: "${shown}" is in the FUSE mount ("${mount}"); it can only be bound ro (a writable view of the mount would let the agent write its own controls)`,
    );
  }
  if (!under(real, ctxReal)) return;
  const rel = real.slice(ctxReal.length + 1);
  if (DATA.some((d) => rel.startsWith(d + "/"))) return;
  throw new CtxError(
    "EACCES",
    `${what}: "${shown}" is the tree's control plane; it can only be bound ro (a writable bind would let the agent rewrite its own authority)`,
  );
}

function checkTarget(t: string, what: string): void {
  if (OWNED_EXACT.includes(t) || OWNED_TREES.some((d) => under(t, d))) {
    throw new CtxError("EACCES", `${what}: target "${t}" is owned by the sandbox runtime`);
  }
  const covered = ANCHORS.find((a) => a !== t && under(a, t));
  if (covered) {
    throw new CtxError("EACCES", `${what}: target "${t}" would cover "${covered}"`);
  }
  if (under(t, "/workspace/.git")) {
    throw new CtxError("EACCES", `${what}: target "${t}" is under the read-only /workspace/.git`);
  }
}

/** Options bubblewrap cannot enforce are refused (fail closed); the rest it always applies. */
function checkOptions(e: MountEntry, real: string, facts: HostFacts, what: string): void {
  if (e.options.includes("noexec")) {
    throw new CtxError(
      "ENOTSUP",
      `${what}: bubblewrap cannot mount noexec; refusing the line rather than ignoring the option`,
    );
  }
  // bwrap binds are always recursive (and always nosuid,nodev), so "bind" only holds when
  // nothing is mounted below the source.
  if (e.options.includes("bind") && facts.submounts(real) !== false) {
    throw new CtxError(
      "ENOTSUP",
      `${what}: "bind" asks for a non-recursive bind, but "${e.source}" has (or may have) mounts below it and bubblewrap binds recursively`,
    );
  }
}

/** Where the sandbox path `p` comes from on the host: [target, host dir or null for a tmpfs]. */
function viewTable(input: ViewInput, plan: Omit<ViewPlan, "cwd">): [string, string | null][] {
  const rows: [string, string | null][] = [];
  if (plan.root) rows.push(["/", plan.root]);
  for (const d of input.layout.dirs) rows.push([`/${d}`, `/${d}`]);
  rows.push(["/tmp", null], ["/run", null], ["/ctx", input.ctx], ["/home/agent", input.home]);
  rows.push(["/workspace", plan.workspace]);
  for (const m of plan.mounts) rows.push([m.dst, m.src]);
  return rows;
}

/** Checks `cwd` against the view: outside it EACCES, absent in it ENOENT, not a directory ENOTDIR. */
function checkCwd(input: ViewInput, plan: Omit<ViewPlan, "cwd">): string {
  let cwd = input.cwd;
  const first = cwd.split("/")[1];
  const link = input.layout.links[first];
  if (link !== undefined && !plan.root) cwd = `/${link}${cwd.slice(first.length + 1)}`;
  let best: [string, string | null] | undefined;
  for (const row of viewTable(input, plan)) {
    if (under(cwd, row[0]) && (!best || row[0].length >= best[0].length)) best = row;
  }
  if (!best) {
    throw new CtxError("EACCES", `"cwd": "${input.cwd}" is outside the agent's view`);
  }
  const [target, src] = best;
  if (src === null) {
    if (cwd === target) return input.cwd;
    throw new CtxError("ENOENT", `"cwd": "${input.cwd}" does not exist in the view`);
  }
  const host = target === "/" ? src + cwd : src + cwd.slice(target.length);
  let st: Deno.FileInfo;
  try {
    st = Deno.statSync(host);
  } catch {
    throw new CtxError("ENOENT", `"cwd": "${input.cwd}" does not exist in the view`);
  }
  if (!st.isDirectory) {
    throw new CtxError("ENOTDIR", `"cwd": "${input.cwd}" is not a directory`);
  }
  return input.cwd;
}

/**
 * Turns the agent's `mount`, `root` and `cwd` controls into what the profile binds. Sources under
 * `/ctx` are the tree's; other sources are host paths and must exist. A line targeting
 * `/workspace` replaces the default workspace. Fails closed: runtime-owned targets and writable
 * binds of the tree's control plane are EACCES; options bubblewrap cannot enforce are ENOTSUP.
 */
export function planView(input: ViewInput, facts: HostFacts = realFacts): ViewPlan {
  const ctxReal = Deno.realPathSync(input.ctx);
  const mount = input.fuse === undefined ? undefined : realMount(input.fuse);
  let workspace = input.workspace, workspaceMode: "ro" | "rw" = "rw";
  const mounts: Bind[] = [];
  for (const e of input.mount) {
    const what = `"mount" line for "${e.target}"`;
    if (e.target === "/ctx" && e.source === "/ctx" && e.mode === "ro") {
      continue; // restates the default: the tree is always bound read-only at /ctx
    }
    if (e.target !== "/workspace") checkTarget(e.target, what);
    const real = realSource(e.source, input.ctx, what);
    if (e.mode === "rw") checkWritable(real, ctxReal, what, e.source, mount);
    checkOptions(e, real, facts, what);
    if (e.target === "/workspace") {
      workspace = real;
      workspaceMode = e.mode;
    } else mounts.push({ src: real, dst: e.target, mode: e.mode });
  }
  const depth = (p: string) => p.split("/").length;
  mounts.sort((a, b) => depth(a.dst) - depth(b.dst));
  let root: string | undefined;
  if (input.root !== undefined) {
    root = realSource(input.root, input.ctx, '"root"');
    if (!Deno.statSync(root).isDirectory) {
      throw new CtxError("ENOTDIR", `"root": "${input.root}" is not a directory`);
    }
    checkWritable(root, ctxReal, '"root"', input.root, mount);
  }
  const plan = { workspace, workspaceMode, mounts, root };
  return { ...plan, cwd: checkCwd(input, plan) };
}
