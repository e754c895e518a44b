/** Whether a socket peer lives outside the daemon's world: another mount namespace or root. */
import { errnoName } from "../abi/errno.ts";
import { closeFd, peerPidfd, pidfdAlive } from "./sock.ts";

function code(e: unknown): string {
  return (e as { code?: string })?.code ?? String(e);
}

// A name when errno.ts knows the number (it maps unknown ones to EIO), else the number.
function name(n: number): string {
  const k = errnoName(n);
  return k === "EIO" && n !== 5 ? `errno ${n}` : k;
}

/**
 * Why the peer of the connected socket `fd` (SO_PEERCRED pid `pid`) is foreign, or undefined when
 * it shares the daemon's mount namespace and root. A sandboxed process (bubblewrap: its own mount
 * namespace) or a chrooted one is foreign; so is one whose world cannot be known (process gone,
 * `/proc` unreadable): the rule fails closed.
 */
export function foreignPeer(fd: number, pid: number): string | undefined {
  // pid 0: the peer's pid namespace is not below the daemon's, so /proc cannot name it.
  if (pid <= 0) return `peer pid ${pid} is not visible from the daemon's pid namespace`;
  const pidfd = peerPidfd(fd);
  if (pidfd < 0) return `cannot pin peer pid ${pid} (SO_PEERPIDFD: ${name(-pidfd)})`;
  try {
    let ns: string, root: Deno.FileInfo;
    try {
      ns = Deno.readLinkSync(`/proc/${pid}/ns/mnt`);
      root = Deno.statSync(`/proc/${pid}/root`);
    } catch (e) {
      return `cannot read the mount namespace and root of peer pid ${pid}: ${code(e)}`;
    }
    // The pidfd pins the process that connected: alive after the reads means the pid was not
    // reused meanwhile, so /proc/<pid> described the real peer.
    const alive = pidfdAlive(pidfd);
    if (alive < 0) return `peer pid ${pid} is gone (${name(-alive)})`;
    const own = Deno.readLinkSync("/proc/self/ns/mnt");
    if (ns !== own) {
      return `peer pid ${pid} is in mount namespace ${ns}, not the daemon's ${own} (a sandbox)`;
    }
    const top = Deno.statSync("/");
    if (root.dev !== top.dev || root.ino !== top.ino) {
      return `peer pid ${pid} has another root directory than the daemon's (chroot)`;
    }
    return undefined;
  } finally {
    closeFd(pidfd);
  }
}
