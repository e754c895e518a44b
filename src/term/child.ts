/** The program on the pseudo-terminal: spawned as a session leader on the slave, its output pumped, its input queued, its window sized. */
import { CtxError, errnoName, ignore } from "../abi/errno.ts";
import { close, pollInSync, read, write } from "../sys/libc.ts";
import { POLL } from "../sys/poll.ts";
import {
  closePoller,
  type ExitStatus,
  openPty,
  Poller,
  setWinSize,
  spawnOnPty,
  waitPid,
  type WinSize,
} from "../sys/pty.ts";

const EAGAIN = 11, EINTR = 4;
/** Input bytes queued for a program that does not read, beyond which input is refused. */
export const MAX_INPUT_QUEUE = 4 * 1024 * 1024;
/** Bytes read before they are handed on as one chunk. */
const CHUNK = 64 * 1024;
/** Chunks between yields to the event loop while output streams without pause. */
const TURNS_PER_YIELD = 16;

/**
 * Lets the event loop run (socket writes, new clients) while output streams. A message, not
 * `setTimeout(0)`: a zero timer costs about 2.6 ms on this Deno, a message about 36 us. The
 * channel is closed again at once, so it never keeps the process alive.
 */
function turn(): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port1.onmessage = () => {
      port1.close();
      port2.close();
      resolve();
    };
    port2.postMessage(0);
  });
}

/** What {@link PtyChild.start} runs. */
export interface ChildSpec {
  /** argv; argv[0] is looked up in `env.PATH` (else the default) when it has no slash. */
  argv: string[];
  /** The program's whole environment. */
  env: Record<string, string>;
  cwd?: string;
  size: WinSize;
  /** Fds the program inherits at their own numbers (a sandbox gate's: see spawnOnPty). */
  inherit?: readonly number[];
}

/** The executable `name` resolves to through `path` (like execvp), or ENOENT. */
export function resolveCommand(name: string, path = "/usr/local/bin:/usr/bin:/bin"): string {
  if (name.includes("/")) return name;
  for (const dir of path.split(":")) {
    if (!dir.startsWith("/")) continue;
    try {
      const st = Deno.statSync(`${dir}/${name}`);
      if (st.isFile && ((st.mode ?? 0) & 0o111) !== 0) return `${dir}/${name}`;
    } catch (e) {
      ignore(
        e,
        Deno.errors.NotFound,
        Deno.errors.NotADirectory,
        Deno.errors.PermissionDenied,
      ); /* next */
    }
  }
  throw new CtxError("ENOENT", `command "${name}" not found in PATH ${path}`);
}

/** One program on its own PTY. */
export class PtyChild {
  readonly pid: number;
  readonly master: number;
  size: WinSize;
  /** Resolves with the program's exit status once it has been reaped. */
  readonly exited: Promise<ExitStatus>;
  #poller: Poller;
  #input: Uint8Array[] = [];
  #inputLen = 0;
  #done = false;
  #pumping: Promise<void> | null = null;

  private constructor(pid: number, master: number, size: WinSize) {
    this.pid = pid;
    this.master = master;
    this.size = size;
    this.#poller = new Poller(master);
    this.exited = waitPid(pid).then((s) => {
      this.#done = true;
      this.#poller.wake(); // the pump drains what is buffered and stops
      return s ?? { code: 255, signal: null };
    });
  }

  /** Opens a PTY of `spec.size` and spawns the program on it; the parent's slave fd is closed. */
  static start(spec: ChildSpec): PtyChild {
    const pair = openPty(spec.size);
    if (typeof pair === "number") {
      throw new CtxError(errnoName(-pair), `openpty failed (errno ${-pair})`);
    }
    let pid: number;
    try {
      const path = resolveCommand(spec.argv[0], spec.env.PATH);
      pid = spawnOnPty({
        path,
        argv: spec.argv,
        env: spec.env,
        cwd: spec.cwd,
        tty: pair.name,
        inherit: spec.inherit,
      });
      if (pid < 0) {
        throw new CtxError(errnoName(-pid), `cannot start ${path} (errno ${-pid})`);
      }
    } catch (e) {
      close(pair.master);
      throw e;
    } finally {
      // Output ends with EIO only once every holder of the slave is gone: never keep a copy.
      close(pair.slave);
    }
    return new PtyChild(pid, pair.master, spec.size);
  }

  /**
   * Reads output until the program is gone (EIO: no holder of the slave left; or it exited and
   * nothing more is buffered), calling `onData` with each chunk; a returned promise is awaited
   * before the next read (backpressure on the program, like a terminal that cannot keep up).
   */
  pump(onData: (bytes: Uint8Array) => void | Promise<void>): Promise<void> {
    return this.#pumping ??= this.#pump(onData);
  }

  async #pump(onData: (bytes: Uint8Array) => void | Promise<void>): Promise<void> {
    const buf = new Uint8Array(CHUNK);
    let turns = 0;
    for (;;) {
      this.#flushInput();
      // Fill the buffer from as many reads as are ready (a PTY gives about 4 KiB a read): one
      // chunk for the VT model, the recording and the clients costs far less than many.
      let len = 0, n = 0;
      while (CHUNK - len >= 4096) {
        n = read(this.master, buf.subarray(len));
        if (n > 0) len += n;
        else if (n !== -EINTR) break;
      }
      if (len > 0) {
        const r = onData(buf.slice(0, len));
        if (r) await r;
        if (++turns % TURNS_PER_YIELD === 0) await turn();
        if (n > 0 || n === -EAGAIN) continue;
      }
      if (n === -EAGAIN) {
        if (this.#done) break;
        // While output streams, more is a few microseconds away: a short wait on this thread
        // beats the hop of an off-thread poll (measured at about 1 ms a turn).
        if (this.#inputLen === 0 && pollInSync(this.master, 1) > 0) continue;
        await this.#poller.wait(POLL.IN | (this.#inputLen > 0 ? POLL.OUT : 0));
        continue;
      }
      if (n < 0 || len === 0) break; // EIO (or anything else): the slave side is gone
    }
  }

  /** Queues input for the program (written as soon as the PTY takes it); false when the queue is full. */
  write(bytes: Uint8Array): boolean {
    if (this.#done) return false;
    if (this.#inputLen + bytes.length > MAX_INPUT_QUEUE) return false;
    this.#input.push(bytes);
    this.#inputLen += bytes.length;
    this.#flushInput();
    if (this.#inputLen > 0) this.#poller.wake(); // re-poll with POLLOUT
    return true;
  }

  #flushInput(): void {
    while (this.#input.length) {
      const b = this.#input[0];
      const n = write(this.master, b);
      if (n < 0) {
        if (n === -EINTR) continue;
        if (n !== -EAGAIN) { // the program is gone: input has nowhere to go
          this.#input = [];
          this.#inputLen = 0;
        }
        return;
      }
      this.#inputLen -= n;
      if (n === b.length) this.#input.shift();
      else this.#input[0] = b.subarray(n);
    }
  }

  /** Sets the window size (the kernel sends SIGWINCH to the foreground process group). */
  resize(size: WinSize): void {
    const r = setWinSize(this.master, size);
    if (r < 0) throw new CtxError(errnoName(-r), `TIOCSWINSZ failed (errno ${-r})`);
    this.size = size;
  }

  /** Signals the program's whole session (its process group: it is the session leader). */
  signal(sig: Deno.Signal): void {
    try {
      Deno.kill(-this.pid, sig);
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* already gone */
    }
  }

  /** Closes the master (after the pump has stopped: no poll may still use it). */
  async close(): Promise<void> {
    this.#done = true;
    this.#poller.wake();
    if (this.#pumping) await this.#pumping;
    closePoller(this.#poller);
    close(this.master);
  }
}
