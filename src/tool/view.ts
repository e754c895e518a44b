/** The sandbox view of one agent process: controls checked by policy and the sandbox, the workspace and `.git` held by fd, private state masked. */
import { checkMounts } from "../policy/mount.ts";
import { networkAllowed } from "../policy/authorize.ts";
import { guardView, type Source, treeData } from "../sandbox/guard.ts";
import { planView } from "../sandbox/mounts.ts";
import { hostLayout, type SandboxSpec } from "../sandbox/profile.ts";
import { dupFd, fdPath, gitGuards, openDir } from "../sandbox/workspace.ts";
import type { AgentDef } from "../store/agent.ts";
import { ensureAgentHome } from "../store/session/claim.ts";
import { asUser } from "../sys/fsid.ts";
import { runtimeDirs } from "../store/terminals.ts";
import { close } from "../sys/libc.ts";
import { ignore } from "../abi/errno.ts";

/** Where the view comes from besides the agent's controls. */
export interface ViewOptions {
  /** Host path of the tree (canonical): bound read-only at /ctx. */
  root: string;
  /** The requesting client's uid (whose home/<uid> holds the agent home). */
  uid: number;
  /**
   * /workspace: an open directory fd (a client's own cwd; duplicated here, the caller keeps its
   * own) or a host path (tests, in-host callers).
   */
  workspace: string | { fd: number };
  /**
   * Host paths no sandbox may see (run dir, ...); the storage root holding `root` and the user
   * runtime dirs of terminals (runtimeDirs) always are.
   */
  hidden?: string[];
  /** The mount projecting `root` (production): a path into it names the tree too. */
  mount?: string;
  /** Host directory backing HOME; default `<root>/home/<uid>/agent/<agent>`. */
  home?: string;
}

/** The view as a sandbox spec (without env, command and runtime binds) and the fds it holds. */
export interface PreparedView {
  spec: Omit<SandboxSpec, "env" | "command" | "binds">;
  /** Closes every fd the view holds (call once the sandbox is gone). */
  close(): void;
}

let layout: ReturnType<typeof hostLayout> | undefined;

/** The host layout, read once per process. */
export function layoutOnce(): ReturnType<typeof hostLayout> {
  return layout ??= hostLayout();
}

/** A host path made canonical (its parent resolved when it does not exist yet). */
function real(p: string): string {
  try {
    return Deno.realPathSync(p);
  } catch (e) {
    ignore(
      e,
      Deno.errors.NotFound,
      Deno.errors.NotADirectory,
      Deno.errors.PermissionDenied,
      Deno.errors.NotCapable, // tsh has no --allow-all: Deno refuses /proc and /dev paths
      "ELOOP",
    );
    const i = p.lastIndexOf("/");
    return i > 0 ? `${real(p.slice(0, i))}/${p.slice(i + 1)}` : p;
  }
}

/** The storage root holding a generation (`<storage>/generations/<g>`), else the tree itself. */
function storageOf(root: string): string {
  const m = /^(.*)\/generations\/[^/]+$/.exec(root);
  return m ? m[1] : root;
}

/**
 * Builds the view of `agent` for one process. The binds its controls ask for must be granted by
 * policy (checkMounts) and enforceable by the sandbox (planView), checked as the identity bwrap
 * binds them with, never as root. The workspace is an fd from here on (what was checked is what
 * is bound); every `.git` in it is bound read-only by fd; binds that would show private state or
 * let the sandbox write session history are refused or masked (guardView). Any refusal spawns
 * nothing and leaves no fd open.
 */
export function prepareView(agent: AgentDef, o: ViewOptions): PreparedView {
  const fds: number[] = [];
  const closeAll = () => {
    for (const fd of fds.splice(0)) close(fd);
  };
  try {
    checkMounts(agent);
    // The agent home belongs to the agent identity (bwrap binds it as that uid): root makes only
    // home/<uid> and gives it away; everything below is made as the uid (never followed as root).
    const home = o.home ?? ensureAgentHome(o.root, {
      uid: o.uid,
      gid: agent.gid,
      groups: agent.groups,
      agent: agent.name,
    });
    const id = { uid: agent.uid, gid: agent.gid, groups: agent.groups };
    const ws = typeof o.workspace === "string" ? openDir(o.workspace) : dupFd(o.workspace.fd);
    fds.push(ws);
    const wsPath = `/proc/self/fd/${ws}`;
    const plan = asUser(id, () =>
      planView({
        ctx: o.root,
        home,
        fuse: o.mount,
        workspace: wsPath,
        mount: agent.mount,
        root: agent.root,
        cwd: agent.cwd,
        layout: layoutOnce(),
      }));
    let wsFd = ws;
    if (plan.workspace !== wsPath) {
      // A mount line replaced the workspace: held open like the default one.
      wsFd = asUser(id, () => openDir(plan.workspace));
      fds.push(wsFd);
    }
    const tree = [o.root, ...(o.mount ? [o.mount] : [])];
    const wsSrc = fdPath(wsFd);
    // A client's cwd in the tree's control plane (`cd /ctx/agent`) is shown, never writable: the
    // same rule a `mount` line gets (planView refuses a writable one), here by downgrading.
    const workspaceMode = treeData(wsSrc, tree) === false ? "ro" : plan.workspaceMode;
    const binds: Source[] = [
      { src: wsSrc, dst: "/workspace", mode: workspaceMode, cwd: wsFd === ws },
      { src: real(home), dst: "/home/agent", mode: "rw" },
      ...plan.mounts.map((m) => ({ src: m.src, dst: m.dst, mode: m.mode })),
      ...(plan.root ? [{ src: plan.root, dst: "/", mode: "rw" as const }] : []),
    ];
    // User-started terminal sockets (of the client and of the agent identity) are hidden too;
    // their records read as the identity (an instance has no DAC override for 0700 sessions).
    const runtime = asUser(id, () => runtimeDirs(o.root, [o.uid, agent.uid]));
    const masks = guardView(binds, {
      hidden: [storageOf(o.root), ...[...(o.hidden ?? []), ...runtime].map(real)],
      tree,
    });
    // A writable workspace without a .git gets an empty one, bound read-only like any other: the
    // sandbox cannot make a repository there that the host's git would obey.
    const guards = asUser(id, () => gitGuards(wsFd, { create: workspaceMode === "rw" }));
    for (const g of guards) fds.push(g.fd);
    return {
      spec: {
        ctx: o.root,
        workspace: { fd: wsFd },
        workspaceMode,
        protect: guards.map((g) => ({ fd: g.fd, dst: `/workspace/${g.rel}` })),
        masks,
        rlimit: agent.rlimit,
        mounts: plan.mounts,
        root: plan.root,
        cwd: plan.cwd,
        home,
        uid: agent.uid,
        gid: agent.gid,
        groups: agent.groups,
        network: networkAllowed(agent),
      },
      close: closeAll,
    };
  } catch (e) {
    closeAll();
    throw e;
  }
}
