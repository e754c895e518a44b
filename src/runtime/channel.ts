/** The instance's end of its private socketpair with the host: hands each accepted connection's fd to the host and gets back the peer's workspace fd, or the reason the peer is refused. */
import { brokerAnswer, MAX_BROKER } from "../abi/broker.ts";
import { ERRNO, errnoName } from "../abi/errno.ts";
import { recvMsg, sendMsg } from "../sys/fdpass.ts";
import { closeFd, pollReadable, Wake } from "../sys/listen.ts";
import type { Workspace } from "./peer.ts";

const enc = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The instance's requests to its host on `sock` (its end of their socketpair, owned and closed
 * here). Requests never wait on the JS thread: a reply is read when a poll off the thread says
 * one came. A host that is gone (the socket hung up) fails every pending and later request with
 * EIO: the instance is ending anyway (its stdin reaches EOF too).
 */
export class HostChannel {
  readonly #sock: number;
  readonly #wake = new Wake();
  readonly #pending = new Map<number, (w: Workspace) => void>();
  #next = 1;
  #gone: string | undefined;
  readonly #loop: Promise<void>;

  constructor(sock: number) {
    this.#sock = sock;
    this.#loop = this.#run();
  }

  /**
   * The workspace of the peer of connection `fd` as the host found it (an O_PATH fd this
   * process owns now), or why the peer is refused. `fd` stays the caller's.
   */
  peer(fd: number): Promise<Workspace> {
    if (this.#gone !== undefined) return Promise.resolve(this.#unanswered());
    const id = this.#next++;
    const r = sendMsg(this.#sock, enc.encode(JSON.stringify({ op: "peer", id })), fd);
    if (r < 0) {
      this.#end(`cannot ask it (${errnoName(-r)})`);
      return Promise.resolve(this.#unanswered());
    }
    return new Promise((resolve) => this.#pending.set(id, resolve));
  }

  /** Stops reading; pending requests fail (EIO). Resolves once the socket is closed. */
  async close(): Promise<void> {
    this.#end("the channel was closed");
    this.#wake.ring();
    await this.#loop;
  }

  #unanswered(): Workspace {
    return { code: "EIO", message: `the host does not answer: ${this.#gone}` };
  }

  #end(why: string): void {
    if (this.#gone !== undefined) return;
    this.#gone = why;
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const resolve of waiting) resolve(this.#unanswered());
  }

  async #run(): Promise<void> {
    try {
      while (this.#gone === undefined) {
        await pollReadable([this.#sock], this.#wake);
        if (this.#gone !== undefined) break;
        this.#drain();
      }
    } finally {
      closeFd(this.#sock);
      this.#wake.close();
    }
  }

  #drain(): void {
    for (;;) {
      const m = recvMsg(this.#sock, MAX_BROKER);
      if (m === -ERRNO.EAGAIN) return;
      if (typeof m === "number") return this.#end(`recvmsg failed (${errnoName(-m)})`);
      if (m.data.length === 0 && m.fds.length === 0) return this.#end("it is gone");
      let a;
      try {
        a = m.truncated ? undefined : brokerAnswer.safeParse(JSON.parse(utf8.decode(m.data)));
      } catch {
        a = undefined;
      }
      const resolve = a?.success ? this.#pending.get(a.data.id) : undefined;
      const fds = m.fds;
      if (
        !a?.success || !resolve || (a.data.ok && fds.length !== 1) || (!a.data.ok && fds.length)
      ) {
        for (const fd of fds) closeFd(fd);
        return this.#end("it broke the protocol");
      }
      this.#pending.delete(a.data.id);
      if (a.data.ok) resolve({ fd: fds[0] });
      else resolve({ code: a.data.code, message: a.data.message });
    }
  }
}
