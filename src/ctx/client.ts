/** The agent socket client used by `ctx agent chat|send|resume|cancel|tsh`: connect, write, read frames. */
import net from "node:net";
import { CtxError, isErrno } from "../abi/errno.ts";
import { encodeFrame } from "../abi/frames.ts";
import { deadMount, START_HINT } from "./root.ts";

/** A frame as the client sees it (clients switch on `type` and `code`, never on `message`). */
export type ClientFrame = { type: string; run?: string; code?: string; [k: string]: unknown };

/** One connection to `agent/<name>.sock`. */
export class AgentClient {
  readonly socket: net.Socket;
  #queue: ClientFrame[] = [];
  #wait?: () => void;
  #ended = false;
  #buf = "";

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.setEncoding("utf8");
    socket.on("data", (s: string) => {
      this.#buf += s;
      let i;
      while ((i = this.#buf.indexOf("\n")) >= 0) {
        const line = this.#buf.slice(0, i);
        this.#buf = this.#buf.slice(i + 1);
        try {
          this.#queue.push(JSON.parse(line));
        } catch {
          this.#queue.push({
            type: "error",
            code: "EPROTO",
            message: "server sent a non-JSON line",
          });
        }
      }
      this.#wake();
    });
    const end = () => {
      this.#ended = true;
      this.#wake();
    };
    socket.on("end", end);
    socket.on("close", end);
    socket.on("error", end);
  }

  #wake(): void {
    const w = this.#wait;
    this.#wait = undefined;
    w?.();
  }

  /** Connects to the agent's socket under the tree (the alias follows to the live socket). */
  static connect(root: string, agent: string): Promise<AgentClient> {
    const path = `${root}/agent/${agent}.sock`;
    return new Promise((resolve, reject) => {
      const s = net.connect(path);
      s.once("connect", () => resolve(new AgentClient(s)));
      s.once("error", (e: Error & { code?: string }) => reject(connectError(root, agent, e)));
    });
  }

  /** Writes one request frame. */
  send(frame: unknown): void {
    if (!this.socket.destroyed) this.socket.write(encodeFrame(frame));
  }

  /** The next frame, or undefined at end of stream. */
  async next(): Promise<ClientFrame | undefined> {
    while (this.#queue.length === 0) {
      if (this.#ended) return undefined;
      await new Promise<void>((r) => this.#wait = r);
    }
    return this.#queue.shift();
  }

  /** Closes the connection. */
  close(): void {
    this.socket.destroy();
  }
}

/** True when the tree says a daemon serves it (the mount's status is `online`). */
function online(root: string): boolean {
  try {
    const text = Deno.readTextFileSync(`${root}/status`);
    return /"state"\s*:\s*"online"|^state=online$/m.test(text);
  } catch {
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
  } catch { /* none yet */ }
  return "default";
}
