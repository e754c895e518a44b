/** The instance's end of its private socketpair with the host: hands each accepted connection's fd to the host and gets back the peer's workspace fd, or the reason the peer is refused. */
import { brokerAnswer, MAX_BROKER } from "../abi/broker.ts";
import { CtxError, ERRNO, type Errno, errnoName } from "../abi/errno.ts";
import type { Claim } from "../store/session/claim.ts";
import { recvMsg, sendMsg } from "../sys/fdpass.ts";
import { pollInSync } from "../sys/libc.ts";
import { closeFd, pollReadable, Wake } from "../sys/listen.ts";
import type { Workspace } from "./peer.ts";

const enc = new TextEncoder();
const ECONNRESET = 104;
/** How long a claim may wait for the host's answer (it is a mkdir and a chown there). */
export const CLAIM_MS = 10_000;
/**
 * Requests that may wait for the host's answers at once (each answer is a small message with at
 * most one fd: 64 of them stay well within a socketpair's buffer, so the host never finds it full).
 */
export const MAX_PENDING = 64;
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
  /** Requests sent and not answered: how many fds their `ok` carries, and who hears it. */
  readonly #pending = new Map<number, { fds: 0 | 1; resolve: (w: Workspace) => void }>();
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
    // Bounded: the host's answers waiting for this process never pass its socket buffer.
    const busy = {
      code: "EAGAIN" as const,
      message: `${MAX_PENDING} connections already wait for the host's check; connect again`,
    };
    if (this.#pending.size >= MAX_PENDING) return Promise.resolve(busy);
    const id = this.#next++;
    const r = sendMsg(this.#sock, enc.encode(JSON.stringify({ op: "peer", id })), fd);
    if (r === -ERRNO.EAGAIN) return Promise.resolve(busy);
    if (r < 0) {
      this.#end(`cannot ask it (${errnoName(-r)})`);
      return Promise.resolve(this.#unanswered());
    }
    return new Promise((resolve) => this.#pending.set(id, { fds: 1, resolve }));
  }

  /**
   * Asks the host to run claim `c` (src/store/session/claim.ts `claimDir`: a directory given to a uid)
   * and waits for its answer on this thread: claimDir's callers are synchronous, and the host
   * answers from its own loop at once (a directory made and chowned). Bounded: a host that does
   * not answer within {@link CLAIM_MS} (or is gone) fails the claim with EIO. Replies to `peer`
   * requests read meanwhile are delivered as usual.
   */
  claimSync(c: Claim): void {
    if (this.#gone !== undefined) throw this.#error(this.#unanswered());
    const id = this.#next++;
    const msg = enc.encode(JSON.stringify({ op: "claim", id, ...c }));
    if (msg.length > MAX_BROKER) {
      throw new CtxError("ENAMETOOLONG", `a claim of ${c.trust}/${c.claim} is too long to ask`);
    }
    const r = sendMsg(this.#sock, msg);
    if (r < 0) {
      this.#end(`cannot ask it (${errnoName(-r)})`);
      throw this.#error(this.#unanswered());
    }
    let answer: Workspace | undefined;
    this.#pending.set(id, { fds: 0, resolve: (a) => answer = a });
    const until = Date.now() + CLAIM_MS;
    while (answer === undefined) {
      const left = until - Date.now();
      if (left <= 0 || pollInSync(this.#sock, left) < 0) {
        // Its answer may still come: taken and dropped then, not a break of the protocol.
        this.#pending.set(id, { fds: 0, resolve: () => {} });
        throw new CtxError("EIO", `the host did not answer a claim within ${CLAIM_MS} ms`);
      }
      this.#drain();
    }
    if (!("fd" in answer)) throw this.#error(answer);
  }

  #error(w: { code: Errno; message: string }): CtxError {
    return new CtxError(w.code, w.message);
  }

  /** Stops reading; pending requests fail (EIO). Resolves once the socket is closed. */
  async close(): Promise<void> {
    this.#end("the channel was closed");
    this.#wake.ring();
    await this.#loop;
  }

  #unanswered(): { code: Errno; message: string } {
    return { code: "EIO", message: `the host does not answer: ${this.#gone}` };
  }

  #end(why: string): void {
    if (this.#gone !== undefined) return;
    this.#gone = why;
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const { resolve } of waiting) resolve(this.#unanswered());
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
      // ECONNRESET: the host closed its end with requests of ours unread.
      if (m === -ECONNRESET) return this.#end("it is gone");
      if (typeof m === "number") return this.#end(`recvmsg failed (errno ${-m})`);
      if (m.data.length === 0 && m.fds.length === 0) return this.#end("it is gone");
      let a;
      try {
        a = m.truncated ? undefined : brokerAnswer.safeParse(JSON.parse(utf8.decode(m.data)));
      } catch {
        a = undefined;
      }
      const want = a?.success ? this.#pending.get(a.data.id) : undefined;
      const fds = m.fds;
      if (!a?.success || !want || fds.length !== (a.data.ok ? want.fds : 0)) {
        for (const fd of fds) closeFd(fd);
        return this.#end("it broke the protocol");
      }
      this.#pending.delete(a.data.id);
      // A claim's `ok` carries no fd: -1 stands for "done" (claimSync only asks whether it is).
      if (a.data.ok) want.resolve({ fd: fds[0] ?? -1 });
      else want.resolve({ code: a.data.code, message: a.data.message });
    }
  }
}
