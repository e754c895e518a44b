/** The host's end of one instance's private socketpair: it checks the peers of the connections the instance accepted (the `/proc/<pid>` reads the instance has no capability for) and hands back their workspace fds, and gives the agent's own directories to its uid (the chown it has no capability for); it never waits on the instance. */
import { type BrokerAnswer, brokerAsk, type ClaimAsk, MAX_BROKER } from "../abi/broker.ts";
import { ERRNO, type Errno, errnoName, toCtxError } from "../abi/errno.ts";
import { loadAgent } from "../store/agent.ts";
import { type Claim, claimsOf, runClaim } from "../store/session/claim.ts";
import { boundFile, notUnixStream, recvMsg, sendMsg, unixName } from "../sys/fdpass.ts";
import { closeFd, pollReadable, Wake } from "../sys/listen.ts";
import { peerCred } from "../sys/sock.ts";
import { peerWorkspace } from "../runtime/peer.ts";

/** What one agent's broker checks a handed fd against, and where it may claim directories. */
export interface BrokerOptions {
  agent: string;
  /** The tree and the run dir (claims are made below one of them only). */
  root: string;
  run: string;
  /** The agent's listening socket, as the host made it (its fd stays the host's). */
  listener: number;
  /** Its path (`<run>/agent/<n>.sock`). */
  path: string;
}

const enc = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Why `fd` is not a connection accepted on `o.listener` (bound to `o.bound`), or undefined when it is: a connected
 * AF_UNIX stream socket, named by the agent's path, bound to the very file the host's listener
 * is bound to (a socket the instance made itself, a socketpair or one bound anew at that path
 * after an unlink, is not), and not the listener.
 */
function notAccepted(
  fd: number,
  o: BrokerOptions & { bound: ReturnType<typeof boundFile> },
): string | undefined {
  const kind = notUnixStream(fd);
  if (kind !== undefined) return kind;
  const name = unixName(fd);
  if (typeof name === "number") return `getsockname failed (errno ${-name})`;
  if (name !== o.path) {
    return `its local address is ${JSON.stringify(name)}, not ${JSON.stringify(o.path)}`;
  }
  const mine = o.bound;
  const got = boundFile(fd);
  if (typeof mine !== "object" || mine === null) return `the listener's bound file is unknown`;
  if (typeof got === "number") return `its bound file is unknown (${errnoName(-got)})`;
  if (got === null) return "it is bound to no file";
  if (got.ino !== mine.ino || got.dev !== mine.dev) {
    return `it is bound to another file (inode ${got.ino}) than the listener (inode ${mine.ino})`;
  }
  return undefined;
}

/** The answer to a `peer` request carrying `fd` (closed here, whatever the answer). */
function answerPeer(
  id: number,
  fd: number,
  o: BrokerOptions & { bound: ReturnType<typeof boundFile> },
): { a: BrokerAnswer; ws?: number } {
  try {
    const why = notAccepted(fd, o);
    if (why !== undefined) {
      return {
        a: {
          id,
          ok: false,
          code: "EACCES",
          message: `the host refuses the fd: not a connection to agent ${o.agent}'s socket: ${why}`,
        },
      };
    }
    let pid: number;
    try {
      pid = peerCred(fd).pid;
    } catch (e) {
      return { a: { id, ok: false, code: "EACCES", message: String((e as Error).message) } };
    }
    // The very checks the single-process runtime makes, on this socket, as the host.
    const ws = peerWorkspace(fd, pid);
    if ("fd" in ws) return { a: { id, ok: true }, ws: ws.fd };
    return { a: { id, ok: false, code: ws.code, message: ws.message } };
  } finally {
    closeFd(fd);
  }
}

function refused(id: number, code: Errno, message: string): BrokerAnswer {
  return { id, ok: false, code, message };
}

/**
 * The answer to a `claim`: run it when it is one of the claims the runtime makes for the agent's
 * identity as the host reads it now (its sessions of each scope, its home), else EACCES.
 */
function claim(ask: ClaimAsk, o: BrokerOptions): BrokerAnswer {
  const { id, op: _op, ...c } = ask;
  try {
    const def = loadAgent(o.root, o.agent);
    const owner = { uid: def.uid, gid: def.gid, groups: def.groups };
    const mine = claimsOf({ root: o.root, run: o.run, agent: o.agent, ...owner });
    const same = (k: Claim) =>
      k.trust === c.trust && k.claim === c.claim && k.uid === c.uid && k.gid === c.gid &&
      k.mode === c.mode && k.legacy.join("\0") === c.legacy.join("\0");
    if (!mine.some(same)) {
      return refused(
        id,
        "EACCES",
        `the host refuses to claim ${c.trust}/${c.claim} for ${c.uid}:${c.gid}: not a claim of agent ${o.agent} (uid ${def.uid}, gid ${def.gid})`,
      );
    }
    runClaim(c, owner);
    return { id, ok: true };
  } catch (e) {
    const err = toCtxError(e);
    return refused(id, err.errno, err.message);
  }
}

/**
 * Answers one instance's requests on `sock` (the host's end of their socketpair, which the
 * broker owns and closes) until the instance closes its end, breaks the protocol's bounds, or
 * {@link Broker.close}. Each request is read without waiting and answered at once from the host's
 * own event loop; a reply the instance does not take (its buffer full) ends the channel rather
 * than wait: a hung or hostile instance costs the host one poll thread, never its loop.
 */
export class Broker {
  readonly #sock: number;
  readonly #o: BrokerOptions & { bound: ReturnType<typeof boundFile> };
  readonly #wake = new Wake();
  #closed = false;
  /** Resolves once the channel is closed (the socket and the wake fd too). */
  readonly done: Promise<void>;

  constructor(sock: number, o: BrokerOptions) {
    this.#sock = sock;
    // The listener's bound file, once: it is the host's socket and never changes.
    this.#o = { ...o, bound: boundFile(o.listener) };
    this.done = this.#run();
  }

  /** Ends the channel (the instance's next request fails); resolves once it is closed. */
  close(): Promise<void> {
    this.#closed = true;
    this.#wake.ring();
    return this.done;
  }

  async #run(): Promise<void> {
    try {
      while (!this.#closed) {
        await pollReadable([this.#sock], this.#wake);
        if (this.#closed || !this.#drain()) break;
      }
    } finally {
      closeFd(this.#sock);
      this.#wake.close();
    }
  }

  /** Reads and answers every waiting request; false once the channel must end. */
  #drain(): boolean {
    for (;;) {
      const m = recvMsg(this.#sock, MAX_BROKER);
      if (m === -ERRNO.EAGAIN) return true;
      if (typeof m === "number") return false;
      if (m.data.length === 0 && m.fds.length === 0) return false; // the instance closed its end
      if (!this.#answer(m.data, m.fds, m.truncated)) return false;
    }
  }

  #answer(data: Uint8Array, fds: number[], truncated: boolean): boolean {
    let ask;
    try {
      ask = truncated ? undefined : brokerAsk.safeParse(JSON.parse(utf8.decode(data)));
    } catch {
      ask = undefined;
    }
    if (!ask?.success) {
      // Outside the protocol: nothing is answered, every fd it carried is closed, the channel ends.
      for (const fd of fds) closeFd(fd);
      return false;
    }
    const { id } = ask.data;
    if (ask.data.op === "claim") {
      for (const fd of fds) closeFd(fd);
      return this.#reply(
        fds.length ? refused(id, "EINVAL", "a claim carries no fd") : claim(ask.data, this.#o),
      );
    }
    if (fds.length !== 1) {
      for (const fd of fds) closeFd(fd);
      const message = `a peer request carries exactly one fd, not ${fds.length}`;
      return this.#reply({ id, ok: false, code: "EINVAL", message });
    }
    const { a, ws } = answerPeer(id, fds[0], this.#o);
    return this.#reply(a, ws);
  }

  #reply(a: BrokerAnswer, fd?: number): boolean {
    const out = a.ok ? a : { ...a, message: a.message.slice(0, 800) }; // the schema's bound
    const r = sendMsg(this.#sock, enc.encode(JSON.stringify(out)), fd);
    if (fd !== undefined) closeFd(fd); // in flight, the message holds its own reference
    return r >= 0;
  }
}
