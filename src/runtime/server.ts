/** One listener per agent definition: socket file, alias symlink, peer credentials, frame dispatch. */
import net from "node:net";
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import { tempName } from "../abi/names.ts";
import { encodeFrame, errorOf, OPS, request } from "../abi/frames.ts";
import { closeFd, fdOf, type PeerCred, peerCred, setCloexec } from "../sys/sock.ts";
import { Conn } from "./conn.ts";
import { admitPeer, opCancel, type OpContext, opResume, opSend, opTsh } from "./ops.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A served agent socket. */
export interface Listener {
  name: string;
  path: string;
  server: net.Server;
  conns: Set<Conn>;
}

function errorFrame(e: unknown, id?: string) {
  const err: CtxError = toCtxError(e);
  return errorOf(err.errno, err.message, id ? { id } : {});
}

/**
 * Turns a connection away at accept: one error frame, then the fd is closed as soon as the kernel
 * holds the frame (a few hundred bytes: it fits an empty socket buffer). Nothing waits on the
 * peer (no half-close it could keep open, no timer), nothing is counted or kept.
 */
function refuse(socket: net.Socket, frame: unknown): void {
  socket.on("error", () => {/* the peer left first: destroy follows */});
  socket.write(encodeFrame(frame), () => socket.destroy());
}

/** Points `agent/<name>.sock` in the tree at the live socket (symlink to a temp name + rename). */
export function linkAlias(root: string, name: string, target: string): void {
  const alias = `${root}/agent/${name}.sock`;
  try {
    if (Deno.readLinkSync(alias) === target) return; // a restart on the same run dir
  } catch (e) {
    ignore(e, Deno.errors.NotFound, "EINVAL"); /* absent, or not a link */
  }
  const tmp = `${root}/agent/${tempName(`${name}.sock`)}`;
  try {
    Deno.removeSync(tmp);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* none left over */
  }
  Deno.symlinkSync(target, tmp);
  Deno.renameSync(tmp, alias);
}

/**
 * Requests (send/tsh/resume) one connection may have waiting behind the one that runs. A client
 * pipelining a few requests is served in order; each waiting one holds its frame (up to 1 MiB), so
 * 4 bounds that to a few MiB per connection. Beyond it the request is answered EBUSY, not buffered.
 */
export const MAX_QUEUED = 4;
/**
 * Live connections one peer uid may hold across every agent socket of the daemon (root too): room
 * for many concurrent clients (20 on one session is a required case), while one uid's worst case
 * stays bounded (64 x (1 running + 4 waiting) frames of at most 1 MiB).
 */
export const MAX_CONNS_PER_UID = 64;

/** The per-connection request queue: a promise chain and how many links have not started. */
interface Queue {
  p: Promise<void>;
  waiting: number;
}

function handle(
  ctx: OpContext,
  name: string,
  conn: Conn,
  raw: Uint8Array,
  queue: Queue,
) {
  let v: unknown;
  try {
    v = JSON.parse(utf8.decode(raw));
  } catch {
    void conn.send(errorOf("EINVAL", "frame is not one UTF-8 JSON object"));
    return;
  }
  const op = (v as { op?: unknown })?.op;
  const id = typeof (v as { id?: unknown })?.id === "string" ? (v as { id: string }).id : undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    void conn.send(errorOf("EINVAL", "frame is not a JSON object"));
    return;
  }
  if (typeof op !== "string" || !(OPS as readonly string[]).includes(op)) {
    void conn.send(errorOf("EINVAL", `unknown op ${JSON.stringify(op ?? null)}`, id ? { id } : {}));
    return;
  }
  const p = request.safeParse(v);
  if (!p.success) {
    const issue = p.error.issues[0];
    void conn.send(
      errorOf(
        "EINVAL",
        `invalid ${op} frame: ${issue?.path.join(".") || "frame"}: ${issue?.message}`,
        id ? { id } : {},
      ),
    );
    return;
  }
  const req = p.data;
  const guard = (fn: () => Promise<unknown>) => async () => {
    try {
      await fn();
    } catch (e) {
      await conn.send(errorFrame(e, "id" in req ? req.id : undefined));
    }
  };
  // A queued request starts only while its connection is open: a client that left wants nothing.
  const enqueue = (fn: () => Promise<unknown>) => {
    if (queue.waiting >= MAX_QUEUED) {
      void conn.send(
        errorOf(
          "EBUSY",
          `${MAX_QUEUED} requests already wait on this connection; send it again later`,
          id ? { id } : {},
        ),
      );
      return;
    }
    queue.waiting++;
    queue.p = queue.p.then(() => {
      queue.waiting--;
      return conn.gone ? undefined : guard(fn)();
    });
  };
  switch (req.op) {
    case "cancel":
      void guard(() => opCancel(ctx, conn, name, req.id))();
      return;
    case "approve":
      void conn.send(errorOf("EINVAL", "no approval_request is pending on this connection"));
      return;
    case "send":
      return enqueue(() => opSend(ctx, conn, name, req));
    case "tsh":
      return enqueue(() => opTsh(ctx, conn, name, req));
    case "resume":
      return enqueue(() => opResume(ctx, conn, name, req.session));
    default: {
      const never: never = req;
      return never;
    }
  }
}

/** The server of one agent socket: every accepted connection is checked, then read. */
function serverOf(ctx: OpContext, name: string, conns: Set<Conn>): net.Server {
  // Half-open: a client may close its write side and still read the rest of its run.
  return net.createServer(
    { allowHalfOpen: true },
    (socket) => void accept(ctx, name, conns, socket),
  );
}

/**
 * One accepted connection: its peer is counted on its uid's cap, checked ({@link
 * OpContext.workspaceOf}: at home, and its cwd, pinned to the process that connected), admitted
 * by the agent's owner rule, then read.
 */
async function accept(ctx: OpContext, name: string, conns: Set<Conn>, socket: net.Socket) {
  let cred: PeerCred, fd: number;
  try {
    fd = fdOf(socket);
    setCloexec(fd); // accepted sockets must not leak into agent processes either
    cred = peerCred(fd);
  } catch (e) {
    return refuse(socket, errorFrame(e));
  }
  // The cap comes before any other per-connection work: a flood costs one getsockopt each.
  const uid = cred.uid;
  const live = ctx.peers.get(uid) ?? 0;
  if (live >= MAX_CONNS_PER_UID) {
    return refuse(
      socket,
      errorOf("EBUSY", `uid ${uid} already has ${MAX_CONNS_PER_UID} connections to this daemon`),
    );
  }
  // Counted from here (the check may wait on the host), given back once, when it closes or is
  // refused.
  ctx.peers.set(uid, live + 1);
  let counted = true;
  const uncount = () => {
    if (!counted) return;
    counted = false;
    const n = (ctx.peers.get(uid) ?? 1) - 1;
    if (n > 0) ctx.peers.set(uid, n);
    else ctx.peers.delete(uid);
  };
  socket.on("error", () => {/* the peer left: close follows */});
  // Decided once: a connection's peer process and its namespaces cannot change, and a foreign
  // peer is closed here, before any request of it is read.
  const workspace = await ctx.workspaceOf(fd, cred.pid);
  if (!("fd" in workspace)) {
    uncount();
    return refuse(socket, errorOf(workspace.code, workspace.message));
  }
  if (socket.destroyed) { // it left while it was checked: nothing holds the workspace
    closeFd(workspace.fd);
    return uncount();
  }
  const conn = new Conn(socket, cred, workspace);
  conns.add(conn);
  ctx.changed?.();
  conn.onClose(() => {
    conns.delete(conn);
    ctx.changed?.();
  });
  conn.onClose(uncount);
  // A peer of the wrong uid is half-closed, not destroyed: a client writing its request after
  // our answer gets no EPIPE and reads the EACCES frame; its fd counts on its own uid's cap.
  try {
    admitPeer(ctx, name, conn);
  } catch (e) {
    void conn.end(errorFrame(e));
    return;
  }
  const queue: Queue = { p: Promise.resolve(), waiting: 0 };
  socket.on("end", () => void queue.p.then(() => socket.end()));
  conn.read(
    (line) => handle(ctx, name, conn, line, queue),
    () => void conn.send(errorOf("EMSGSIZE", "frame exceeds 1 MiB")),
  );
}

/**
 * Serves a listening socket handed over by the host (socket activation, fd 3): accepts on it,
 * never binds, never links the alias, and never removes the socket file (the host owns both).
 */
export async function listenFd(ctx: OpContext, name: string, fd: number): Promise<Listener> {
  setCloexec(fd); // inherited without close-on-exec: no sandbox may ever see it
  const conns = new Set<Conn>();
  const server = serverOf(ctx, name, conns);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ fd }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  setCloexec(fdOf(server)); // node:net may serve a copy of it
  return { name, path: "", server, conns };
}

/**
 * Serves connection `fd`, accepted on `l`'s socket by the host (which admitted its peer), as if
 * `l` had accepted it: the same checks (uid cap, peer, owner rule), then read.
 */
export function adoptConn(ctx: OpContext, l: Listener, fd: number): void {
  const socket = new net.Socket({ fd, allowHalfOpen: true, readable: true, writable: true });
  void accept(ctx, l.name, l.conns, socket);
}

/** Stops a listener: no new connections, open ones closed, the socket file removed. */
export async function unlisten(l: Listener): Promise<void> {
  const closed = new Promise<void>((r) => l.server.close(() => r()));
  for (const c of l.conns) c.socket.destroy();
  await closed;
  if (l.path === "") return; // handed over: the host's socket file
  try {
    Deno.removeSync(l.path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* already gone */
  }
}
