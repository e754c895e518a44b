/** The socket activator: one poll over every idle agent's listening fd; a readable one (a client waits in its backlog) is handed to the supervisor, which admits or refuses who waits. */
import { closeFd, pollReadable, Wake } from "../sys/listen.ts";

/**
 * Waits for readability of every armed listening fd with ONE nonblocking poll (plus an eventfd
 * that re-arms the wait when the set changes): event-driven, no timers. A readable fd is disarmed
 * before `onReadable` hears of it; the supervisor arms it again when the instance has exited.
 * The activator never accepts: the supervisor does (src/host/supervisor.ts `#admit`), then
 * arms the fd again or starts the instance.
 */
export class Activator {
  readonly #armed = new Map<string, number>();
  readonly #wake = new Wake();
  /** fds forgotten while a poll may hold them: closed before the next poll starts. */
  #closing: number[] = [];
  #closed = false;
  readonly #loop: Promise<void>;

  constructor(private readonly onReadable: (name: string) => void) {
    this.#loop = this.#run();
  }

  /** Waits on `fd` for `name` (again). */
  arm(name: string, fd: number): void {
    this.#armed.set(name, fd);
    this.#wake.ring();
  }

  /** Stops waiting on `name`'s fd (an instance serves it now); the fd stays open. */
  disarm(name: string): void {
    if (this.#armed.delete(name)) this.#wake.ring();
  }

  /** Stops waiting on `fd` and closes it once no poll holds it. */
  forget(name: string, fd: number): void {
    this.#armed.delete(name);
    this.#closing.push(fd);
    this.#wake.ring();
  }

  /** True while `name` is armed. */
  armed(name: string): boolean {
    return this.#armed.has(name);
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      for (const fd of this.#closing) closeFd(fd);
      this.#closing = [];
      const byFd = new Map<number, string>();
      for (const [name, fd] of this.#armed) byFd.set(fd, name);
      const ready = await pollReadable([...byFd.keys()], this.#wake);
      if (this.#closed) break;
      for (const fd of ready) {
        const name = byFd.get(fd);
        // Still armed with the same fd: a name disarmed (or re-served) meanwhile is not started.
        if (name === undefined || this.#armed.get(name) !== fd) continue;
        this.#armed.delete(name);
        this.onReadable(name);
      }
    }
    for (const fd of this.#closing) closeFd(fd);
    this.#closing = [];
  }

  /** Ends the wait; armed fds stay open (the supervisor closes them). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wake.ring();
    await this.#loop;
    this.#wake.close();
  }
}
