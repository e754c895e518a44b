/** One agent's runtime instance: takes the listening socket its host hands over (fd 3), waits to be released, serves that agent alone, exits when idle or told to. */
import { CtxError, ignore } from "../abi/errno.ts";
import { delegateClaims } from "../store/session/claim.ts";
import { isSeqpacket, notUnixStream } from "../sys/fdpass.ts";
import { setCloexec } from "../sys/sock.ts";
import { HostChannel } from "./channel.ts";
import { startRuntime } from "./mod.ts";
import { type AgentStatus, Presence } from "./presence.ts";

/** The handed-over listening socket (systemd's SD_LISTEN_FDS_START). */
export const LISTEN_FD = 3;
/**
 * The instance's end of its private socketpair with the host (SOCK_SEQPACKET): the host checks
 * the peers of the connections it accepts there (src/runtime/channel.ts, broker.ts).
 */
export const HOST_FD = 4;
/**
 * With `--conn`: the connection whose client made the host start this instance, which the host
 * accepted and admitted by the owner rule (src/host/supervisor.ts): served like one accepted here.
 */
export const CONN_FD = 5;

/** Options for {@link runInstance}. */
export interface InstanceOptions {
  agent: string;
  root: string;
  run: string;
  mount?: string;
  /** Exit after this long with no connection and no run (ms). */
  idleMs: number;
  toolCache?: string;
  /** How long an approval_request waits for its answer (default: the runtime's, 60 s). */
  approvalTimeoutMs?: number;
  /** The process environment (LISTEN_FDS, LISTEN_PID). */
  env: Record<string, string | undefined>;
  /** The host handed over its first client's connection as {@link CONN_FD}. */
  conn?: boolean;
}

/**
 * Checks the socket-activation hand-over: exactly one fd (LISTEN_FDS=1) meant for this very
 * process (LISTEN_PID). Anything else is a launch this code did not make: refuse it.
 */
export function checkHandover(env: Record<string, string | undefined>, pid: number): void {
  if (env.LISTEN_FDS !== "1" || env.LISTEN_PID !== String(pid)) {
    throw new CtxError(
      "EINVAL",
      `an instance needs LISTEN_FDS=1 and LISTEN_PID=${pid} (got ${
        JSON.stringify(env.LISTEN_FDS ?? null)
      } and ${JSON.stringify(env.LISTEN_PID ?? null)}): it is started by cortexfsd only`,
    );
  }
}

/** The test hook that makes an instance hang before `ready` (spec/runtime.md "Start timeout"). */
export const HANG_HOOK = "CORTEXFS_TEST_HANG_BEFORE_READY";

/**
 * Test hook: when the process environment names a file in {@link HANG_HOOK} and this instance
 * removes it (one instance per file), it parks its thread for good before it serves, as a hung
 * start would. Only the environment cortexfsd was started with sets it (instances inherit the
 * host's; no frame, control or session file reaches it; sandboxes start from an empty one).
 */
function hangIfAsked(agent: string, env: Record<string, string | undefined>): void {
  const flag = env[HANG_HOOK];
  if (!flag) return;
  try {
    Deno.removeSync(flag);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return; // consumed by an earlier instance, or never made: start as usual
  }
  console.error(`instance ${agent}: test hook ${HANG_HOOK}: hanging before ready`);
  // No signal listener yet: SIGTERM ends it with the default action, as a hung start would.
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(cell, 0, 0);
}

/** Reads stdin up to the first newline: that line (null at EOF before one) and what followed. */
async function firstLine(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  dec: TextDecoder,
): Promise<{ line: string | null; rest: string }> {
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) return { line: null, rest: "" };
    text += dec.decode(value, { stream: true });
  }
  const nl = text.indexOf("\n");
  return { line: text.slice(0, nl), rest: text.slice(nl + 1) };
}

/**
 * The instance's side of its host's pipes once released: lines on stdout (`status <word>`, then
 * `ready`), and on stdin one `ok` per status line, sent once the host has written `status` and
 * `pid`. EOF on stdin: the host is gone (every report then resolves at once).
 */
class HostLink {
  readonly #pending: (() => void)[] = [];
  #gone = false;
  #out: Promise<void> = Promise.resolve();
  /** Resolves at stdin EOF. */
  readonly closed: Promise<void>;

  constructor(reader: ReadableStreamDefaultReader<Uint8Array>, dec: TextDecoder, rest: string) {
    this.closed = this.#read(reader, dec, rest);
  }

  /** Writes one line to the host (in order; a host gone is not an error). */
  say(line: string): Promise<void> {
    const bytes = new TextEncoder().encode(`${line}\n`);
    this.#out = this.#out.then(async () => {
      for (let off = 0; off < bytes.length;) off += await Deno.stdout.write(bytes.subarray(off));
    }).catch(() => {});
    return this.#out;
  }

  /** Reports a status; resolves once the host has written it (or is gone). */
  report(status: AgentStatus): Promise<void> {
    if (this.#gone) return Promise.resolve();
    const acked = new Promise<void>((resolve) => this.#pending.push(resolve));
    void this.say(`status ${status}`);
    return acked;
  }

  async #read(reader: ReadableStreamDefaultReader<Uint8Array>, dec: TextDecoder, text: string) {
    try {
      for (;;) {
        let nl: number;
        while ((nl = text.indexOf("\n")) >= 0) {
          if (text.slice(0, nl) === "ok") this.#pending.shift()?.();
          text = text.slice(nl + 1);
        }
        const { value, done } = await reader.read();
        if (done) break;
        text += dec.decode(value, { stream: true });
      }
    } catch { /* any kind: a failed read is a closed channel; #gone tells the waiters */ }
    this.#gone = true;
    for (const resolve of this.#pending.splice(0)) resolve();
  }
}

/**
 * Runs the instance until it ends; resolves to its exit code. It is held until the host writes
 * `go` (the receipt is on disk by then), prints `ready` once it serves, and ends: when idle for
 * `idleMs` (0), on SIGTERM after cancelling every live run durably (0), or when the host goes
 * (stdin EOF: live runs are interrupted, EINTR, as a daemon stop records them).
 */
export async function runInstance(o: InstanceOptions): Promise<number> {
  checkHandover(o.env, Deno.pid);
  if (!isSeqpacket(HOST_FD)) {
    throw new CtxError(
      "EINVAL",
      `an instance needs its host's socketpair as fd ${HOST_FD}: it is started by cortexfsd only`,
    );
  }
  setCloexec(HOST_FD); // inherited without close-on-exec: no sandbox may ever see it
  if (o.conn) {
    const why = notUnixStream(CONN_FD);
    if (why !== undefined) {
      throw new CtxError("EINVAL", `an instance's handed connection (fd ${CONN_FD}): ${why}`);
    }
    setCloexec(CONN_FD);
  }
  // The hand-over names this process only: nothing it spawns may read it as its own.
  for (const k of ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"]) Deno.env.delete(k);
  const stdin = Deno.stdin.readable.getReader();
  const dec = new TextDecoder();
  const go = await firstLine(stdin, dec);
  if (go.line !== "go") return 0; // the host let go of it before releasing it: nothing was served
  hangIfAsked(o.agent, o.env);
  // The host keeps stdin open for the instance's whole life: EOF means the host is gone.
  const host = new HostLink(stdin, dec, go.rest);
  const channel = new HostChannel(HOST_FD);
  // The instance has no CAP_CHOWN: a directory due to be given to a uid is given by the host.
  delegateClaims((c) => channel.claimSync(c));
  let idle: ReturnType<typeof setTimeout> | undefined;
  let ending: Promise<number> | undefined;
  const held: { rt?: Awaited<ReturnType<typeof startRuntime>> } = {};
  const ended = Promise.withResolvers<number>();
  const end = (how: "idle" | "stop" | "host") =>
    ending ??= (async () => {
      clearTimeout(idle);
      if (how === "stop") await held.rt?.cancelAll();
      await held.rt?.close();
      await channel.close();
      // The host is gone: nothing holds the socket any more (its next start says idle again).
      if (how === "host") new Presence(o.root).set(o.agent, "dead", null);
      ended.resolve(0);
      return 0;
    })();
  const watch = () => {
    clearTimeout(idle);
    if (held.rt && held.rt.activity() === 0) idle = setTimeout(() => void end("idle"), o.idleMs);
  };
  const rt = held.rt = await startRuntime({
    root: o.root,
    run: o.run,
    mount: o.mount,
    toolCache: o.toolCache,
    approvalTimeoutMs: o.approvalTimeoutMs,
    instance: {
      agent: o.agent,
      fd: LISTEN_FD,
      conn: o.conn ? CONN_FD : undefined,
      report: (st) => host.report(st),
      peer: (fd) => channel.peer(fd),
    },
    changed: watch,
  });
  for (const r of rt.recovered) console.error(`instance ${o.agent}: closed interrupted run ${r}`);
  // What its start found, as one record in the agent's log (what a crash left, what is skipped).
  const { recovered, broken, reaped } = rt;
  console.error(`instance ${o.agent}: started: ${JSON.stringify({ recovered, broken, reaped })}`);
  Deno.addSignalListener("SIGTERM", () => void end("stop"));
  Deno.addSignalListener("SIGINT", () => void end("stop"));
  void host.closed.then(() => end("host"));
  await host.say("ready");
  watch();
  return await ended.promise;
}
