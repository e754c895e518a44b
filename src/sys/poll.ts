/** `struct pollfd` arrays for poll(2): built and read here, polled by each caller (ffi.ts `poll`, on or off the JS thread). */

/** poll(2) event bits. */
export const POLL = { IN: 1, OUT: 4, ERR: 8, HUP: 0x10, NVAL: 0x20 } as const;

/**
 * `struct pollfd { int fd; short events; short revents; }` times `n`, made once and refilled per
 * wait: a poll in flight owns its set (waits that may overlap each make their own).
 */
export class PollFds {
  /** The array, for poll's first argument. */
  readonly buf: Uint8Array;
  /** `n` as the BigInt poll's nfds takes, converted once. */
  readonly count: bigint;
  readonly #view: DataView;

  constructor(n: number) {
    this.buf = new Uint8Array(8 * n);
    this.count = BigInt(n);
    this.#view = new DataView(this.buf.buffer);
  }

  /** A set asking each of `fds` for `events`, in that order. */
  static of(fds: readonly number[], events: number): PollFds {
    const p = new PollFds(fds.length);
    fds.forEach((fd, i) => p.set(i, fd, events));
    return p;
  }

  /** Entry `i` asks `fd` for `events` (0: only POLLERR, POLLHUP, POLLNVAL); its revents cleared. */
  set(i: number, fd: number, events: number): void {
    const v = this.#view;
    v.setInt32(8 * i, fd, true);
    v.setInt16(8 * i + 4, events, true);
    v.setInt16(8 * i + 6, 0, true);
  }

  /** What the last poll reported for entry `i`. */
  revents(i: number): number {
    return this.#view.getInt16(8 * i + 6, true);
  }
}
