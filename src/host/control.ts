/** The host control socket `<run>/control.sock`: `ps`, `status`, `start`, `stop` frames to the supervisor; authority from SO_PEERCRED. */
import { errorOf } from "../abi/frames.ts";
import { controlRequest } from "../abi/control_sock.ts";
import net from "node:net";
import { AGENT_CONTROLS } from "../abi/controls.ts";
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import { readControl, resolveAgent } from "../store/agent.ts";
import { ERRNO, errnoName } from "../abi/errno.ts";
import { ARCH } from "../sys/arch.ts";
import { errno, libc } from "../sys/ffi.ts";
import { listenUnix, pollReadable, Wake } from "../sys/listen.ts";
import { POLL, PollFds } from "../sys/poll.ts";
import { closeFd, type PeerCred, peerCred } from "../sys/sock.ts";
import { MAX_CONNS_PER_UID } from "../runtime/server.ts";
import { peerWorkspace, type Workspace } from "../runtime/peer.ts";
import type { Supervisor } from "./supervisor.ts";

/** Longest request line (a name is at most 64 bytes; the rest is slack). */
const MAX_LINE = 4096;
/** accept(2): the peer left before its connection was accepted. */
const ECONNABORTED = 103;

/** The control socket's path under a run dir. */
export function controlSocket(run: string): string {
  return `${run}/control.sock`;
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
  workspaceOf: () => Workspace,
  line: string,
): Promise<unknown> {
  const sup = supervisor();
  if (!sup) throw new CtxError("EAGAIN", "the supervisor is starting; ask again");
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    throw new CtxError("EINVAL", "frame is not one JSON object");
  }
  const p = controlRequest.safeParse(v);
  if (!p.success) {
    const i = p.error.issues[0];
    throw new CtxError("EINVAL", `invalid frame: ${i?.path.join(".") || "frame"}: ${i?.message}`);
  }
  const req = p.data;
  if (req.op === "ps") return { type: "ps", instances: sup.ps() };
  const agent = req.agent;
  if (!sup.agents().includes(agent)) {
    throw new CtxError("ENOENT", `agent ${agent} is not served by this host`);
  }
  switch (req.op) {
    case "status":
      return { type: "status", ...sup.status(agent) };
    case "start": {
      const session = req.session ?? "default";
      mayControl(root, agent, uid);
      const r = await sup.start(agent, uid);
      // The session's terminal, in the requester's own cwd (opened at accept, never from the frame).
      let terminal = null, already = r.already;
      if (req.terminal !== false) {
        const workspace = workspaceOf();
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
  }
}

/**
 * Live control connections of all non-root uids together. Each holds one root fd (two while a
 * `start` hands its cwd over), in the fd table of the process serving `/dev/fuse`: 256 keeps the
 * worst case near 512 fds, far below the daemon's RLIMIT_NOFILE (spec/runtime.md "Host control
 * socket" has the numbers), so a flood never leaves the mount without fds. Root is not counted here
 * (only on its own per-uid cap): the administrator can always stop an agent.
 */
export const MAX_CONTROL_CONNS = 256;

/** Longest wait between two accepts after an accept error (EMFILE, ENFILE, ENOBUFS, ...). */
const MAX_BACKOFF_MS = 1000;

/**
 * Serves `<run>/control.sock` (0666, close-on-exec) for the supervisor `sup()` returns. Start it
 * before the supervisor. The listener is the host's own (made close-on-exec) and so is the accept
 * loop: an accept error (EMFILE, ENFILE, ...) is waited out, never the end of the listener, and
 * each connection is counted on its uid's cap ({@link MAX_CONNS_PER_UID}, as the agent sockets)
 * and on {@link MAX_CONTROL_CONNS} before anything else is done for it.
 */
export function serveControl(
  sup: () => Supervisor | undefined,
  options: { root: string; run: string },
): Control {
  const path = controlSocket(options.run);
  try {
    if (Deno.lstatSync(path).isSocket) Deno.removeSync(path); // a killed host's
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* absent */
  }
  const lfd = listenUnix(path);
  if (lfd < 0) throw new CtxError(errnoName(-lfd), `cannot listen on ${path}`);
  Deno.chmodSync(path, 0o666);
  const socks = new Set<net.Socket>();
  const peers = new Map<number, number>();
  let others = 0; // live connections of non-root uids
  // Rung on close and whenever a connection ends: an accept loop waiting out EMFILE retries then.
  const wake = new Wake();
  let closed = false;

  const serve = (fd: number) => {
    // Refused before node:net ever sees the fd: nothing is kept, nothing waits on the peer.
    let cred: PeerCred;
    try {
      cred = peerCred(fd);
    } catch (e) {
      const err = toCtxError(e);
      return refuseFd(fd, errorOf(err.errno, err.message));
    }
    const uid = cred.uid;
    const live = peers.get(uid) ?? 0;
    if (live >= MAX_CONNS_PER_UID) {
      return refuseFd(
        fd,
        errorOf("EBUSY", `uid ${uid} already has ${MAX_CONNS_PER_UID} connections to ${path}`),
      );
    }
    if (uid !== 0 && others >= MAX_CONTROL_CONNS) {
      return refuseFd(
        fd,
        errorOf("EBUSY", `${MAX_CONTROL_CONNS} connections to ${path} are open; ask again later`),
      );
    }
    const socket = new net.Socket(
      { fd, readable: true, writable: true } as net.SocketConstructorOpts,
    );
    peers.set(uid, live + 1);
    if (uid !== 0) others++;
    socks.add(socket);
    // Opened when a `start` needs it, not at accept: a connection for ps/status holds one fd.
    let workspace: Workspace | undefined;
    const workspaceOf = () => workspace ??= peerWorkspace(fd, cred.pid);
    socket.on("close", () => {
      socks.delete(socket);
      const n = (peers.get(uid) ?? 1) - 1;
      if (n > 0) peers.set(uid, n);
      else peers.delete(uid);
      if (uid !== 0) others--;
      // After the requests under way: a start may still hand the fd to its terminal.
      void chain.then(() => {
        if (workspace && "fd" in workspace) closeFd(workspace.fd);
        if (!closed) wake.ring();
      });
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
            out = await answer(sup, options.root, uid, workspaceOf, line);
          } catch (e) {
            const err = toCtxError(e);
            out = errorOf(err.errno, err.message);
          }
          if (!socket.destroyed) socket.write(JSON.stringify(out) + "\n");
        });
      }
    });
  };

  const loop = (async () => {
    let backoff = 0;
    while (!closed) {
      const fd = libc().accept4(lfd, null, null, ARCH.SOCK.NONBLOCK | ARCH.SOCK.CLOEXEC);
      if (fd >= 0) {
        backoff = 0;
        serve(fd);
        continue;
      }
      const e = errno();
      if (e === ERRNO.EAGAIN) {
        await pollReadable([lfd], wake);
        continue;
      }
      if (e === ERRNO.EINTR || e === ECONNABORTED) continue;
      // EMFILE, ENFILE, ENOBUFS, ENOMEM or anything else: the connection stays queued; retry
      // once a connection closes, or after a backoff (a full table may be someone else's).
      backoff = Math.min(backoff ? backoff * 2 : 10, MAX_BACKOFF_MS);
      await waitWake(wake, backoff);
    }
  })();

  return {
    path,
    async close() {
      closed = true;
      wake.ring();
      await loop;
      for (const s of socks) s.destroy();
      closeFd(lfd);
      wake.close();
      try {
        Deno.removeSync(path);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* gone */
      }
    },
  };
}

/**
 * Answers a refused connection with one frame and closes it at once (nonblocking; a small frame
 * fits an empty socket buffer). What the peer already sent is read first: a close with unread
 * data would reset the connection and the peer could lose the frame.
 */
function refuseFd(fd: number, frame: unknown): void {
  const s = libc();
  const out = new TextEncoder().encode(JSON.stringify(frame) + "\n");
  s.write(fd, out, BigInt(out.length));
  const buf = new Uint8Array(MAX_LINE);
  for (let i = 0; i < 4 && Number(s.read(fd, buf, BigInt(buf.length))) > 0; i++);
  closeFd(fd);
}

/** Waits until `wake` rings or `ms` passed (off the JS thread), then drains it. */
async function waitWake(wake: Wake, ms: number): Promise<void> {
  const p = PollFds.of([wake.fd], POLL.IN);
  await libc().poll(p.buf, p.count, ms);
  wake.drain();
}
