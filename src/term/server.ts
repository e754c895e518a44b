/** The terminal socket: admits the owner (or root) by SO_PEERCRED, reads each client's mode line, sends hello + snapshot + live output, drops slow clients. */
import net from "node:net";
import { CtxError, ignore } from "../abi/errno.ts";
import {
  type ClientMode,
  encodeFrame,
  FRAME,
  FrameReader,
  jsonFrame,
  MAX_MODE_LINE,
  parseSize,
  sizePayload,
} from "../abi/terminal.ts";
import { foreignPeer } from "../sys/foreign.ts";
import { fdOf, peerCred, setCloexec } from "../sys/sock.ts";
import type { WinSize } from "../sys/pty.ts";

/** Bytes queued to one client beyond which it is dropped (it never slows the PTY or others). */
export const MAX_CLIENT_BACKLOG = 8 * 1024 * 1024;
/** How long a client has to send its mode line. */
export const MODE_TIMEOUT_MS = 5000;

/** One connected client as the terminal sees it. */
export interface ClientInfo {
  id: number;
  mode: ClientMode;
  uid: number;
  pid: number;
}

/** What the server asks of the terminal it serves. */
export interface ServerHooks {
  /** The hello frame's body for a new client. */
  hello(c: ClientInfo): Record<string, unknown>;
  /** The current screen (escape sequences), exactly at the stream position it is asked at. */
  snapshot(): Promise<string>;
  /** Input from an attached client (never called for a watcher). */
  input(bytes: Uint8Array, c: ClientInfo): void;
  /** A window size from an attached client (never called for a watcher). */
  resize(size: WinSize, c: ClientInfo): void;
  attached(c: ClientInfo): void;
  detached(c: ClientInfo, reason: string, droppedInput: number): void;
}

/**
 * Who may connect: the terminal's owner or root, in either mode. What a mode may do is decided
 * per frame in {@link TermServer} (a watcher's input and resize frames are dropped there); this is
 * the one admission rule, kept pure for tests.
 */
export function admit(peerUid: number, owner: number): { ok: true } | { ok: false; why: string } {
  if (peerUid === owner || peerUid === 0) return { ok: true };
  return { ok: false, why: `uid ${peerUid} is not the terminal's owner (uid ${owner}) or root` };
}

class Client {
  info: ClientInfo;
  live = false;
  queue: Uint8Array[] = [];
  queued = 0;
  droppedInput = 0;
  gone = false;
  constructor(readonly socket: net.Socket, info: ClientInfo) {
    this.info = info;
  }
  get backlog(): number {
    return this.socket.writableLength + this.queued;
  }
}

/**
 * Makes `dir` a directory only we can enter (0700), creating it and its missing parents (0700).
 * `search`: others may pass through it (0711, never list or write it): a root-run terminal owned
 * by another uid, whose socket admission is SO_PEERCRED's alone.
 */
function privateDir(dir: string, search = false): void {
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = Deno.lstatSync(dir);
  if (!st.isDirectory) throw new CtxError("ENOTDIR", "socket directory", { path: dir });
  if (st.uid !== Deno.uid()) {
    throw new CtxError("EACCES", `socket directory belongs to uid ${st.uid}`, { path: dir });
  }
  const want = search ? 0o711 : 0o700;
  if (((st.mode ?? 0) & 0o777) !== want) Deno.chmodSync(dir, want);
}

/** Removes a stale socket at `path` (nothing answers on it); EADDRINUSE when one does. */
async function clearStale(path: string): Promise<void> {
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return;
  }
  if (!st.isSocket) throw new CtxError("EEXIST", "not a socket", { path });
  const live = await new Promise<boolean>((resolve) => {
    const s = net.connect(path);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
  if (live) throw new CtxError("EADDRINUSE", "another terminal is serving this socket", { path });
  Deno.removeSync(path);
}

/** The socket server of one terminal. */
export class TermServer {
  readonly path: string;
  #server: net.Server;
  #clients = new Set<Client>();
  #next = 1;
  #ino: number | null = null;

  private constructor(path: string, server: net.Server) {
    this.path = path;
    this.#server = server;
  }

  /**
   * Listens on `path` (mode 0600 in a 0700 directory; the umask is left alone: it is the
   * process's, and changing it across the listen's await would narrow every file any other code
   * makes meanwhile, while the directory alone already keeps others from the socket) and
   * serves clients with `hooks`; only `owner` and root are admitted (SO_PEERCRED, at accept).
   * When `owner` is not our uid (a supervised terminal: root's ctxterm, the requester's terminal)
   * the socket is 0666 in a 0711 directory, as the agent sockets are: the kernel lets the owner
   * connect, SO_PEERCRED still decides who is served.
   */
  static async listen(
    path: string,
    options: { owner: number; hooks: ServerHooks },
  ): Promise<TermServer> {
    const widen = options.owner !== Deno.uid();
    privateDir(path.slice(0, path.lastIndexOf("/")) || "/", widen);
    await clearStale(path);
    const ref: { self?: TermServer } = {};
    const server = net.createServer({ allowHalfOpen: false }, (socket) => {
      if (ref.self) ref.self.#accept(socket, options.owner, options.hooks);
      else socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => {
        server.off("error", reject);
        resolve();
      });
    });
    setCloexec(fdOf(server)); // never inherited by the program on the PTY
    Deno.chmodSync(path, widen ? 0o666 : 0o600);
    const self = ref.self = new TermServer(path, server);
    self.#ino = Deno.lstatSync(path).ino;
    return self;
  }

  /** The largest number of bytes queued to one client now. */
  get backlog(): number {
    let max = 0;
    for (const c of this.#clients) max = Math.max(max, c.backlog);
    return max;
  }

  /** Clients connected now (watchers and attachers). */
  get clients(): ClientInfo[] {
    return [...this.#clients].map((c) => c.info);
  }

  #accept(socket: net.Socket, owner: number, hooks: ServerHooks): void {
    socket.on("error", () => {/* close follows */});
    this.#sockets.add(socket);
    socket.on("close", () => this.#sockets.delete(socket));
    let cred, fd;
    try {
      fd = fdOf(socket);
      setCloexec(fd);
      cred = peerCred(fd);
    } catch (e) {
      socket.end(jsonFrame(FRAME.error, { code: "EIO", message: String(e) }));
      return;
    }
    const verdict = admit(cred.uid, owner);
    if (!verdict.ok) {
      socket.end(jsonFrame(FRAME.error, { code: "EACCES", message: verdict.why }));
      return;
    }
    // The owner's uid is not enough: a sandboxed tool runs as it too, and must not drive this (or
    // another agent's) terminal. A peer in another mount namespace or root is refused, as on the
    // agent sockets. A root peer of a server that is not root's is taken as is (its /proc is not
    // ours to read; root is admitted by rule).
    const foreign = cred.uid !== 0 || Deno.uid() === 0 ? foreignPeer(fd, cred.pid) : undefined;
    if (foreign !== undefined) {
      socket.end(jsonFrame(FRAME.error, { code: "EACCES", message: foreign }));
      return;
    }
    // The mode line: at most MAX_MODE_LINE bytes, then frames.
    let head = new Uint8Array(0);
    const timer = setTimeout(() => {
      socket.end(jsonFrame(FRAME.error, { code: "ETIMEDOUT", message: "no mode line" }));
    }, MODE_TIMEOUT_MS);
    socket.once("close", () => clearTimeout(timer));
    const onHead = (chunk: Uint8Array) => {
      const buf = new Uint8Array(head.length + chunk.length);
      buf.set(head);
      buf.set(chunk, head.length);
      const nl = buf.indexOf(0x0a);
      if (nl < 0) {
        head = buf;
        if (head.length >= MAX_MODE_LINE) {
          clearTimeout(timer);
          socket.off("data", onHead);
          socket.end(jsonFrame(FRAME.error, { code: "EINVAL", message: "mode line too long" }));
        }
        return;
      }
      clearTimeout(timer);
      socket.off("data", onHead);
      const mode = new TextDecoder().decode(buf.subarray(0, nl)).trim();
      if (nl + 1 > MAX_MODE_LINE || (mode !== "watch" && mode !== "attach")) {
        socket.end(jsonFrame(FRAME.error, {
          code: "EINVAL",
          message: `the first line must be "watch" or "attach"`,
        }));
        return;
      }
      const c = new Client(socket, { id: this.#next++, mode, uid: cred.uid, pid: cred.pid });
      this.#start(c, hooks, buf.subarray(nl + 1));
    };
    socket.on("data", onHead);
  }

  #start(c: Client, hooks: ServerHooks, rest: Uint8Array): void {
    this.#clients.add(c);
    const reader = new FrameReader();
    const onFrames = (chunk: Uint8Array) => {
      const frames = reader.push(chunk);
      if (frames === null) return this.#drop(c, hooks, "oversized frame");
      for (const f of frames) {
        if (f.type === FRAME.detach) return this.#drop(c, hooks, "detach");
        // Read-only is enforced here, per frame, whatever the client claims or sends.
        if (c.info.mode !== "attach") {
          if (f.type === FRAME.input) c.droppedInput++;
          continue;
        }
        if (f.type === FRAME.input) hooks.input(f.payload, c.info);
        else if (f.type === FRAME.resize) {
          const size = parseSize(f.payload);
          if (size) hooks.resize(size, c.info);
        }
      }
    };
    c.socket.on("data", onFrames);
    c.socket.on("close", () => this.#drop(c, hooks, "closed"));
    hooks.attached(c.info);
    this.#send(c, jsonFrame(FRAME.hello, hooks.hello(c.info)), true);
    // Output read from now on queues behind the snapshot, which is taken at exactly this point.
    hooks.snapshot().then((screen) => {
      if (c.gone) return;
      this.#send(c, encodeFrame(FRAME.snapshot, new TextEncoder().encode(screen)), true);
      c.live = true;
      for (const q of c.queue.splice(0)) this.#send(c, q, true);
      c.queued = 0;
    });
    if (rest.length) onFrames(rest);
  }

  #send(c: Client, frame: Uint8Array, now = false): void {
    if (c.gone) return;
    if (!c.live && !now) {
      c.queue.push(frame);
      c.queued += frame.length;
    } else c.socket.write(frame);
    if (c.backlog > MAX_CLIENT_BACKLOG) {
      this.#dropSlow(c);
    }
  }

  #dropSlow(c: Client): void {
    // Not a wait: the client's queue is discarded and its socket destroyed at once.
    c.queue = [];
    c.queued = 0;
    c.socket.destroy();
    this.#slow.add(c);
  }
  #slow = new Set<Client>();
  #closing = false;
  /** Every accepted socket, admitted or not: closing the server ends them all. */
  #sockets = new Set<net.Socket>();

  #drop(c: Client, hooks: ServerHooks, reason: string): void {
    if (c.gone) return;
    c.gone = true;
    this.#clients.delete(c);
    c.queue = [];
    if (!c.socket.destroyed) c.socket.end();
    const why = this.#slow.delete(c) ? "slow" : this.#closing ? "exit" : reason;
    hooks.detached(c.info, why, c.droppedInput);
  }

  /** Sends PTY output to every client (queued behind the snapshot for those still joining). */
  output(bytes: Uint8Array): void {
    if (this.#clients.size === 0) return;
    const f = encodeFrame(FRAME.output, bytes);
    for (const c of this.#clients) this.#send(c, f);
  }

  /** Tells every client the PTY's new window size. */
  size(size: WinSize): void {
    const f = encodeFrame(FRAME.size, sizePayload(size.rows, size.cols));
    for (const c of this.#clients) this.#send(c, f);
  }

  /** Sends the exit frame, closes every client and the listener, and removes the socket file. */
  async close(exit: { exit_code: number; signal: number | null }): Promise<void> {
    const f = jsonFrame(FRAME.exit, exit);
    const ends: Promise<void>[] = [];
    this.#closing = true;
    for (const c of this.#clients) {
      if (!c.live) {
        c.live = true;
        for (const q of c.queue.splice(0)) c.socket.write(q);
      }
      ends.push(
        new Promise((r) => {
          c.socket.once("close", () => r());
          c.socket.end(f);
        }),
      );
    }
    // Bounded: a client that never reads its last frames is cut off.
    const cut = setTimeout(() => {
      for (const s of this.#sockets) s.destroy();
    }, 2000);
    // Connections refused or still sending their mode line have nothing more to hear.
    const clientSockets = new Set([...this.#clients].map((c) => c.socket));
    for (const s of this.#sockets) if (!clientSockets.has(s)) s.destroy();
    await Promise.all([...ends, new Promise<void>((r) => this.#server.close(() => r()))]);
    clearTimeout(cut);
    this.unlink();
  }

  /** Removes the socket file if it is still the one this server made. */
  unlink(): void {
    try {
      if (Deno.lstatSync(this.path).ino === this.#ino) Deno.removeSync(this.path);
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* gone */
    }
  }
}
