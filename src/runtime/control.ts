/** The host control socket `<run>/host.sock`: `ps`, `status`, `start`, `stop` frames to the supervisor; authority from SO_PEERCRED. */
import { errorOf } from "../abi/frames.ts";
import net from "node:net";
import { AGENT_CONTROLS } from "../abi/controls.ts";
import { CtxError, toCtxError } from "../abi/errno.ts";
import { readControl, resolveAgent } from "../store/agent.ts";
import { closeFd, fdOf, peerCred, setCloexec } from "../sys/sock.ts";
import { peerWorkspace, type Workspace } from "./peer.ts";
import type { Supervisor } from "./supervisor.ts";

/** Longest request line (a name is at most 64 bytes; the rest is slack). */
const MAX_LINE = 4096;
const NAME = /^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}$/;

/** The control socket's path under a run dir. */
export function hostSocket(run: string): string {
  return `${run}/host.sock`;
}

/** A served control socket. */
export interface Control {
  path: string;
  close(): Promise<void>;
}

/** Root or the agent's owner may start and stop it; anyone may read `ps`/`status`. */
function mayControl(root: string, agent: string, uid: number): void {
  if (uid === 0) return;
  const dir = `${root}/agent/${resolveAgent(root, agent)}.d`;
  const owner = readControl<number>(dir, "owner", AGENT_CONTROLS.owner);
  if (owner !== uid) {
    throw new CtxError(
      "EACCES",
      `peer uid ${uid} is neither the owner (${owner ?? "none"}) of agent ${agent} nor 0`,
    );
  }
}

async function answer(
  supervisor: () => Supervisor | undefined,
  root: string,
  uid: number,
  workspace: Workspace,
  line: string,
): Promise<unknown> {
  const sup = supervisor();
  if (!sup) throw new CtxError("EAGAIN", "the supervisor is starting; ask again");
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line);
  } catch {
    throw new CtxError("EINVAL", "frame is not one JSON object");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new CtxError("EINVAL", "frame is not a JSON object");
  }
  const op = v.op;
  if (op === "ps") return { type: "ps", instances: sup.ps() };
  const agent = v.agent;
  if (typeof agent !== "string" || !NAME.test(agent)) {
    throw new CtxError("EINVAL", `"agent" must be an agent name, not ${JSON.stringify(agent)}`);
  }
  if (!sup.agents().includes(agent)) {
    throw new CtxError("ENOENT", `agent ${agent} is not served by this host`);
  }
  switch (op) {
    case "status":
      return { type: "status", ...sup.status(agent) };
    case "start": {
      const session = v.session ?? "default";
      if (typeof session !== "string" || !NAME.test(session)) {
        throw new CtxError(
          "EINVAL",
          `"session" must be a session name, not ${JSON.stringify(session)}`,
        );
      }
      mayControl(root, agent, uid);
      const r = await sup.start(agent);
      // The session's terminal, in the requester's own cwd (opened at accept, never from the frame).
      let terminal = null, already = r.already;
      if (v.terminal !== false) {
        if (!("fd" in workspace)) {
          throw new CtxError("EACCES", `no workspace: ${workspace.message}`);
        }
        const t = await sup.startTerminal({ agent, session, uid, workspace: workspace.fd });
        terminal = t.terminal;
        already &&= t.already;
      }
      return { type: "started", agent, already, receipt: r.receipt, terminal };
    }
    case "stop": {
      mayControl(root, agent, uid);
      const r = await sup.stop(agent);
      return {
        type: "stopped",
        agent,
        result: r.result,
        receipt: r.receipt,
        terminals: r.terminals,
      };
    }
    default:
      throw new CtxError("EINVAL", `unknown op ${JSON.stringify(op ?? null)}`);
  }
}

/**
 * Serves `<run>/host.sock` (0666, close-on-exec) for the supervisor `sup()` returns. Start it
 * before the supervisor: its listener is close-on-exec only once `listen` is done, and no
 * instance may be spawned before then.
 */
export async function serveControl(
  sup: () => Supervisor | undefined,
  options: { root: string; run: string },
): Promise<Control> {
  const path = hostSocket(options.run);
  try {
    if (Deno.lstatSync(path).isSocket) Deno.removeSync(path); // a killed host's
  } catch { /* absent */ }
  const socks = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    let uid: number, workspace: Workspace;
    try {
      const fd = fdOf(socket);
      setCloexec(fd);
      const cred = peerCred(fd);
      uid = cred.uid;
      // At accept, as the host (every capability): the requester's cwd, or why it has none.
      workspace = peerWorkspace(fd, cred.pid);
    } catch {
      socket.destroy();
      return;
    }
    socks.add(socket);
    socket.on("close", () => {
      socks.delete(socket);
      // After the requests under way: a start may still hand the fd to its terminal.
      if ("fd" in workspace) void chain.then(() => closeFd(workspace.fd as number));
    });
    socket.on("error", () => {/* the peer left */});
    let buf = "";
    let chain = Promise.resolve();
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buf += chunk;
      if (buf.length > MAX_LINE && !buf.includes("\n")) {
        socket.end(
          JSON.stringify(errorOf("EMSGSIZE", "frame too long")) + "\n",
        );
        return;
      }
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        // In order, one at a time: a `stop` answered after the `start` before it.
        chain = chain.then(async () => {
          let out: unknown;
          try {
            out = await answer(sup, options.root, uid, workspace, line);
          } catch (e) {
            const err = toCtxError(e);
            out = errorOf(err.errno, err.message);
          }
          if (!socket.destroyed) socket.write(JSON.stringify(out) + "\n");
        });
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  setCloexec(fdOf(server));
  Deno.chmodSync(path, 0o666);
  return {
    path,
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of socks) s.destroy();
      await closed;
      try {
        Deno.removeSync(path);
      } catch { /* gone */ }
    },
  };
}
