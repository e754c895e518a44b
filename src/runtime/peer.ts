/** What a connection's peer is to the runtime: at home (its cwd, opened as an O_PATH fd, is the connection's workspace) or refused, and why. Run where every capability is held: the host, or the single-process runtime. */
import { type Errno, toCtxError } from "../abi/errno.ts";
import { openDir } from "../sandbox/workspace.ts";
import { closeFd, peerPidfd, pidfdAlive } from "../sys/sock.ts";
import { foreignPeer } from "../sys/foreign.ts";

/** A peer's workspace (an O_PATH fd the receiver owns), or why it has none. */
export type Workspace = { fd: number } | { code: Errno; message: string };

/**
 * The workspace of the peer of the connected socket `fd` (SO_PEERCRED pid `pid`): its
 * `/proc/<pid>/cwd` magic link opened O_PATH (no path is resolved, nothing the client says names
 * it), after {@link foreignPeer} found it at home; the process is pinned by SO_PEERPIDFD and
 * alive after every read, so a pid reused meanwhile is noticed. Each `/proc/<pid>` read is a
 * ptrace read check on the peer: for a root peer only CAP_SYS_PTRACE passes it.
 */
export function peerWorkspace(fd: number, pid: number): Workspace {
  const foreign = foreignPeer(fd, pid);
  if (foreign !== undefined) return { code: "EACCES", message: foreign };
  const pidfd = peerPidfd(fd);
  if (pidfd < 0) return { code: "EACCES", message: `cannot pin peer pid ${pid}` };
  try {
    let ws: number;
    try {
      ws = openDir(`/proc/${pid}/cwd`);
    } catch (e) {
      return {
        code: "EACCES",
        message: `cannot open the working directory of peer pid ${pid}: ${toCtxError(e).message}`,
      };
    }
    if (pidfdAlive(pidfd) < 0) {
      closeFd(ws);
      return { code: "EACCES", message: `peer pid ${pid} is gone` };
    }
    return { fd: ws };
  } finally {
    closeFd(pidfd);
  }
}
