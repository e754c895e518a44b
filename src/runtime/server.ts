/** One listener per agent definition: socket file, alias symlink, peer credentials, frame dispatch. */
import net from "node:net";
import { type CtxError, toCtxError } from "../abi/errno.ts";
import { OPS, request } from "../abi/frames.ts";
import { ensureDir } from "../store/atomic.ts";
import { fdOf, peerCred, setCloexec } from "../sys/sock.ts";
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
  return { type: "error", code: err.errno, message: err.message, ...(id ? { id } : {}) };
}

function workspaceOf(pid: number, fallback: string): string {
  try {
    return Deno.readLinkSync(`/proc/${pid}/cwd`);
  } catch {
    return fallback;
  }
}

/** Points `agent/<name>.sock` in the tree at the live socket (symlink to a temp name + rename). */
export function linkAlias(root: string, name: string, target: string): void {
  const alias = `${root}/agent/${name}.sock`;
  const tmp = `${root}/agent/.${name}.sock.tmp-${Deno.pid}`;
  try {
    Deno.removeSync(tmp);
  } catch { /* none left over */ }
  Deno.symlinkSync(target, tmp);
  Deno.renameSync(tmp, alias);
}

function handle(
  ctx: OpContext,
  name: string,
  conn: Conn,
  raw: Uint8Array,
  queue: { p: Promise<void> },
) {
  let v: unknown;
  try {
    v = JSON.parse(utf8.decode(raw));
  } catch {
    void conn.send({
      type: "error",
      code: "EINVAL",
      message: "frame is not one UTF-8 JSON object",
    });
    return;
  }
  const op = (v as { op?: unknown })?.op;
  const id = typeof (v as { id?: unknown })?.id === "string" ? (v as { id: string }).id : undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    void conn.send({ type: "error", code: "EINVAL", message: "frame is not a JSON object" });
    return;
  }
  if (typeof op !== "string" || !(OPS as readonly string[]).includes(op)) {
    void conn.send({
      type: "error",
      code: "EINVAL",
      message: `unknown op ${JSON.stringify(op ?? null)}`,
      ...(id ? { id } : {}),
    });
    return;
  }
  const p = request.safeParse(v);
  if (!p.success) {
    const issue = p.error.issues[0];
    void conn.send({
      type: "error",
      code: "EINVAL",
      message: `invalid ${op} frame: ${issue?.path.join(".") || "frame"}: ${issue?.message}`,
      ...(id ? { id } : {}),
    });
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
  switch (req.op) {
    case "cancel":
      void guard(() => opCancel(ctx, conn, name, req.id))();
      return;
    case "approve":
      void conn.send({
        type: "error",
        code: "EINVAL",
        message: "no approval_request is pending on this connection",
      });
      return;
    case "send":
      queue.p = queue.p.then(guard(() => opSend(ctx, conn, name, req)));
      return;
    case "tsh":
      queue.p = queue.p.then(guard(() => opTsh(ctx, conn, name, req)));
      return;
    case "resume":
      queue.p = queue.p.then(guard(() => opResume(ctx, conn, name, req.session)));
      return;
    default: {
      const never: never = req;
      return never;
    }
  }
}

/** Listens on `<run>/agent/<name>.sock` (0666; SO_PEERCRED decides) and links the tree alias. */
export async function listen(ctx: OpContext, name: string): Promise<Listener> {
  const dir = `${ctx.run}/agent`;
  ensureDir(dir, 0o711); // reachable by name, not listable
  const path = `${dir}/${name}.sock`;
  try {
    if (Deno.lstatSync(path).isSocket) Deno.removeSync(path); // stale from a killed daemon
  } catch { /* absent */ }
  const conns = new Set<Conn>();
  // Half-open: a client may close its write side and still read the rest of its run.
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    let conn: Conn;
    try {
      const fd = fdOf(socket);
      setCloexec(fd); // accepted sockets must not leak into agent processes either
      const cred = peerCred(fd);
      conn = new Conn(socket, cred, workspaceOf(cred.pid, "/"));
    } catch (e) {
      socket.end(JSON.stringify(errorFrame(e)) + "\n");
      return;
    }
    conns.add(conn);
    conn.onClose(() => conns.delete(conn));
    try {
      admitPeer(ctx, name, conn);
    } catch (e) {
      void conn.end(errorFrame(e));
      return;
    }
    const queue = { p: Promise.resolve() };
    socket.on("end", () => void queue.p.then(() => socket.end()));
    conn.read(
      (line) => handle(ctx, name, conn, line, queue),
      () => void conn.send({ type: "error", code: "EMSGSIZE", message: "frame exceeds 1 MiB" }),
    );
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
  linkAlias(ctx.root, name, path);
  return { name, path, server, conns };
}

/** Stops a listener: no new connections, open ones closed, the socket file removed. */
export async function unlisten(l: Listener): Promise<void> {
  const closed = new Promise<void>((r) => l.server.close(() => r()));
  for (const c of l.conns) c.socket.destroy();
  await closed;
  try {
    Deno.removeSync(l.path);
  } catch { /* already gone */ }
}
