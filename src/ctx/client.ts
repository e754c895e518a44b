/** The agent socket client used by `ctx agent chat|send|resume|cancel|tsh`: connect, write, read frames. */
import { CtxError, ignore, isErrno } from "../abi/errno.ts";
import { serverFrameStrict } from "../abi/frames.ts";
import { encodeFrame } from "../abi/line.ts";
import { deadMount, START_HINT } from "./root.ts";

/** A frame as the client sees it (clients switch on `type` and `code`, never on `message`). */
export type ClientFrame = { type: string; run?: string; code?: string; [k: string]: unknown };

/**
 * A line from the server as a frame of the socket ABI (src/abi/frames.ts, strict); anything else
 * (not JSON, an unknown type, a key missing or extra) is an EPROTO error frame in its place.
 */
export function frameOf(line: string): ClientFrame {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { type: "error", code: "EPROTO", message: "server sent a non-JSON line" };
  }
  const r = serverFrameStrict.safeParse(v);
  if (r.success) return r.data;
  const t = (v as { type?: unknown } | null)?.type;
  return {
    type: "error",
    code: "EPROTO",
    message: `server sent a frame outside the protocol (type ${JSON.stringify(t ?? null)})`,
  };
}

/**
 * One connection to `agent/<name>.sock`. It speaks through `Deno.connect` (not node:net, whose
 * import alone costs more than the rest of `ctx agent send`): one read loop splits lines, and
 * writes go out in order, each after the one before.
 */
export class AgentClient {
  readonly #conn: Deno.UnixConn;
  #queue: ClientFrame[] = [];
  #wait?: () => void;
  #ended = false;
  #closed = false;
  #buf = "";
  #writes: Promise<void> = Promise.resolve();

  private constructor(conn: Deno.UnixConn) {
    this.#conn = conn;
    void this.#read();
  }

  async #read(): Promise<void> {
    const dec = new TextDecoder();
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) break;
        this.#buf += dec.decode(chunk.subarray(0, n), { stream: true });
        let i;
        while ((i = this.#buf.indexOf("\n")) >= 0) {
          const line = this.#buf.slice(0, i);
          this.#buf = this.#buf.slice(i + 1);
          this.#queue.push(frameOf(line));
        }
        this.#wake();
      }
    } catch (e) {
      ignore(
        e,
        Deno.errors.ConnectionReset,
        Deno.errors.BrokenPipe,
        Deno.errors.BadResource,
        Deno.errors.Interrupted,
      ); /* reset, or closed by close(): the end of the stream either way */
    }
    this.#ended = true;
    this.#wake();
  }

  #wake(): void {
    const w = this.#wait;
    this.#wait = undefined;
    w?.();
  }

  /** Connects to the agent's socket under the tree (the alias follows to the live socket). */
  static async connect(root: string, agent: string): Promise<AgentClient> {
    const path = `${root}/agent/${agent}.sock`;
    try {
      return new AgentClient(await Deno.connect({ transport: "unix", path }));
    } catch (e) {
      throw connectError(root, agent, e as Error & { code?: string });
    }
  }

  /** {@link connect} without the error: undefined when the socket cannot be reached. */
  static async tryConnect(root: string, agent: string): Promise<AgentClient | undefined> {
    try {
      return new AgentClient(
        await Deno.connect({ transport: "unix", path: `${root}/agent/${agent}.sock` }),
      );
    } catch (e) {
      // Unreachable by any of these, the caller's findTree says why (a dead mount is ENOTCONN).
      ignore(
        e,
        Deno.errors.NotFound,
        Deno.errors.ConnectionRefused,
        Deno.errors.PermissionDenied,
        Deno.errors.NotConnected,
        Deno.errors.NotADirectory,
      );
      return undefined;
    }
  }

  /** Writes one request frame (queued after any write still going out). */
  send(frame: unknown): void {
    if (this.#closed) return;
    const bytes = new TextEncoder().encode(encodeFrame(frame));
    this.#writes = this.#writes.then(async () => {
      for (let off = 0; off < bytes.length && !this.#closed;) {
        off += await this.#conn.write(bytes.subarray(off));
      }
    }).catch(() => {/* the peer is gone: the read side ends the stream */});
  }

  /** The next frame, or undefined at end of stream. */
  async next(): Promise<ClientFrame | undefined> {
    while (this.#queue.length === 0) {
      if (this.#ended) return undefined;
      await new Promise<void>((r) => this.#wait = r);
    }
    return this.#queue.shift();
  }

  /** Ends the sending side once the writes queued so far are out (the peer sees end of input). */
  end(): void {
    this.#writes = this.#writes.then(() => this.#conn.closeWrite()).catch(() => {});
  }

  /** Closes the connection (a write still going out is dropped). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch (e) {
      ignore(e, Deno.errors.BadResource); /* already closed */
    }
  }
}

/** True when the tree says a daemon serves it (the mount's status is `online`). */
function online(root: string): boolean {
  try {
    const text = Deno.readTextFileSync(`${root}/status`);
    return /"state"\s*:\s*"online"|^state=online$/m.test(text);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/**
 * What a failed connect means and what to do: refused is a daemon that died (its socket is
 * left), a missing socket on a tree no daemon serves is a daemon not running, a dead mount is
 * ENOTCONN; a missing socket on a live mount is an agent the daemon does not serve.
 */
export function connectError(root: string, agent: string, e: { code?: string; message: string }) {
  const path = `agent/${agent}.sock`;
  const code = e.code ?? "";
  if (code === "ENOTCONN") return deadMount(root);
  if (code === "ECONNREFUSED") {
    return new CtxError(
      "EHOSTDOWN",
      `the daemon serving this tree is gone (connection refused); ${START_HINT} again`,
      { path },
    );
  }
  if (code === "ENOENT" && !online(root)) {
    return new CtxError(
      "EHOSTDOWN",
      `no daemon is serving this tree (${root} is not a live mount, no socket): ${START_HINT}, ` +
        "then use its mount",
      { path },
    );
  }
  const errno = code === "ENOENT" ? "EHOSTDOWN" : code;
  return new CtxError(
    isErrno(errno) ? errno : "EIO",
    `agent ${agent} is not being served (${code || e.message})`,
    { path },
  );
}

/** A fresh client request id. */
export function requestId(prefix = "msg"): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return `${prefix}-${[...b].map((x) => x.toString(16).padStart(2, "0")).join("")}`;
}

/** The session a command uses: `--session`, else `index/current`, else `default`. */
export function pickSession(root: string, uid: number, agent: string, session?: string): string {
  if (session) return session;
  try {
    const cur = Deno.readTextFileSync(`${root}/home/${uid}/agent/${agent}/session/index/current`)
      .trim();
    if (cur) return cur;
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* none yet */
  }
  return "default";
}
