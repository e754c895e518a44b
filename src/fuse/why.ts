/** Why a control write was refused: the last refusal of each (uid, control), which write(2) cannot carry (it has only the errno); `user.cortexfs.refused` shows it to that uid. */
import type { CtxError } from "../abi/errno.ts";

/** Kept (uid, control) pairs: the oldest is dropped past this, so no writer grows the mount. */
const MAX = 4096;

/** The last refused write per (uid, control); an accepted write clears that uid's. */
export class Why {
  #last = new Map<string, string>();

  /** Records `err` as why `uid`'s write of `path` was refused (one line, with the time). */
  refused(path: string, uid: number, err: CtxError, now = new Date()): void {
    const key = `${uid}\0${path}`;
    this.#last.delete(key); // re-inserted last: the map's order is the age
    // deno-lint-ignore no-control-regex
    const rule = err.message.replace(/[\x00-\x1f\x7f]/g, " ");
    this.#last.set(key, `${err.errno}: ${rule} (at ${now.toISOString()})\n`);
    if (this.#last.size > MAX) this.#last.delete(this.#last.keys().next().value!);
  }

  /** `uid`'s write of `path` was committed: nothing of before is why any more. */
  accepted(path: string, uid: number): void {
    this.#last.delete(`${uid}\0${path}`);
  }

  /** The reason shown to `uid` for `path`, or null. */
  of(path: string, uid: number): string | null {
    return this.#last.get(`${uid}\0${path}`) ?? null;
  }
}
