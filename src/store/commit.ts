/** Group commit for one history file: one fsync covers every record written while the previous fsync ran. */
import { CtxError } from "../abi/errno.ts";
import { close, fsyncAsync } from "../sys/libc.ts";

/**
 * The durability of records written to one file with `appendUnsynced`. {@link sync} hands over
 * the fd of a record just written and resolves once an fsync that began after that write has
 * completed: with no fsync running it starts one at once; with one running, the record waits for
 * the next, which starts when the running one ends and covers every record that arrived meanwhile.
 * A flood of N records costs O(flushes), not N fsyncs. The fsync runs off the JS thread.
 */
export class GroupCommit {
  readonly path: string;
  #running: Promise<void> | null = null;
  #next: Promise<void> | null = null;
  #fds: number[] = [];
  #fsync: (fd: number) => Promise<number>;

  /** `fsync` is the real one off the JS thread; tests pass a controllable one. */
  constructor(path: string, options: { fsync?: (fd: number) => Promise<number> } = {}) {
    this.path = path;
    this.#fsync = options.fsync ?? fsyncAsync;
  }

  /** Resolves when the record written on `fd` is durable (EIO when the fsync failed); closes `fd`. */
  sync(fd: number): Promise<void> {
    this.#fds.push(fd);
    if (!this.#running) return this.#running = this.#flush();
    // One waiting flush at most: every record arriving now joins it.
    return this.#next ??= this.#running.catch(() => {}).then(() => {
      this.#next = null;
      return this.#running = this.#flush();
    });
  }

  /** True while records wait for an fsync. */
  get busy(): boolean {
    return this.#running !== null;
  }

  async #flush(): Promise<void> {
    const fds = this.#fds.splice(0);
    try {
      // Any fd of the file flushes all of its dirty data: one fsync for the batch.
      const r = await this.#fsync(fds[fds.length - 1]);
      if (r < 0) throw new CtxError("EIO", "fsync failed", { path: this.path });
    } finally {
      for (const fd of fds) close(fd);
      if (this.#next === null) this.#running = null;
    }
  }
}
