/** Acting as a user on this thread around a synchronous block: on the filesystem (fsuid/fsgid/groups), or as a signal's sender (euid). */
import { CtxError } from "../abi/errno.ts";
import { ARCH } from "./arch.ts";
import { libc } from "./ffi.ts";

/** A filesystem identity: the uid, gid and supplementary groups path checks are made with. */
export interface FsId {
  uid: number;
  gid: number;
  /** Supplementary groups; default none. */
  groups?: readonly number[];
}

// setgroups(2) through glibc changes every thread (a signal broadcast); the raw system call
// changes only the calling one, which is what a per-thread identity needs.
const QUERY = 0xffffffff; // an invalid id: set*id fails and returns the current value

/** The calling thread's current fsuid and fsgid. */
export function currentFsId(): { uid: number; gid: number } {
  const s = libc();
  return { uid: s.setfsuid(QUERY) >>> 0, gid: s.setfsgid(QUERY) >>> 0 };
}

function getGroups(): number[] {
  const s = libc();
  const count = s.getgroups(0, new Uint8Array(0));
  const buf = new Uint32Array(Math.max(count, 1));
  const n = count > 0 ? s.getgroups(count, new Uint8Array(buf.buffer)) : count;
  if (n < 0) throw new CtxError("EPERM", "getgroups failed");
  return [...buf.subarray(0, n)];
}

function setGroups(groups: readonly number[]): void {
  const list = new Uint32Array(groups.length ? groups : [0]);
  const r = libc().sys_setgroups(
    ARCH.SYS.setgroups,
    BigInt(groups.length),
    new Uint8Array(list.buffer),
  );
  if (r !== 0n) {
    throw new CtxError("EPERM", `setgroups(${groups.join(",")}) failed on this thread`);
  }
}

function same(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  const s = [...a].sort((x, y) => x - y), t = [...b].sort((x, y) => x - y);
  return s.every((v, i) => v === t[i]);
}

function switchTo(id: FsId, groups: readonly number[], now: readonly number[]): void {
  const s = libc();
  // Groups first: once the fsuid is not 0 the thread keeps CAP_SETGID, but be minimal anyway.
  if (!same(groups, now)) setGroups(groups);
  s.setfsgid(id.gid);
  s.setfsuid(id.uid);
  const got = currentFsId();
  if (got.uid !== id.uid || got.gid !== id.gid) {
    throw new CtxError(
      "EPERM",
      `cannot take filesystem identity ${id.uid}:${id.gid} (now ${got.uid}:${got.gid})`,
    );
  }
}

/**
 * Runs `fn` with the filesystem identity `id` on this thread (setfsuid/setfsgid and a per-thread
 * setgroups), then restores the previous identity, also when `fn` throws. Deno's synchronous fs
 * calls run on the calling JS thread, so every path lookup inside `fn` is checked as that user:
 * symlinks reach only what the user could reach, and new files are the user's. `fn` must be
 * synchronous: an await would let other work run under the borrowed identity (a returned
 * Promise is refused, after restoring). When `id` is already the thread's identity, `fn` runs
 * as is.
 */
export function asUser<T>(id: FsId, fn: () => T): T {
  // An unprivileged process has no identity to borrow and acts as itself already (and `ctx` runs
  // without --allow-ffi): run as is.
  if (Deno.uid() !== 0) return check(fn());
  const prev = currentFsId();
  const groups = id.groups ?? [];
  const before = getGroups();
  // Already this identity (or a daemon that is not root acting as itself: it could not change its
  // groups, and it needs no borrowed identity for its own files).
  if (prev.uid === id.uid && prev.gid === id.gid && (same(before, groups) || Deno.uid() !== 0)) {
    return check(fn());
  }
  try {
    switchTo(id, groups, before);
    return check(fn());
  } finally {
    restore(prev, before, groups);
  }
}

function restore(prev: { uid: number; gid: number }, groups: number[], now: readonly number[]) {
  const s = libc();
  s.setfsuid(prev.uid);
  s.setfsgid(prev.gid);
  if (!same(groups, now)) setGroups(groups);
  const got = currentFsId();
  if (got.uid !== prev.uid || got.gid !== prev.gid) {
    // Should never happen for root; a thread left as the user has less authority, not more.
    throw new CtxError("EPERM", `could not restore filesystem identity ${prev.uid}:${prev.gid}`);
  }
}

function check<T>(v: T): T {
  if (typeof (v as { then?: unknown })?.then === "function") {
    throw new CtxError("EINVAL", "asUser() needs a synchronous function (it returned a Promise)");
  }
  return v;
}

const KEEP = -1n; // setresuid(2): leave this id as it is

/**
 * Runs `fn`, a synchronous signal send (kill(2), pidfd_send_signal(2), a Deno child's kill), with
 * this thread's effective uid `uid`, then back to 0. Without CAP_KILL, kill(2) lets a sender whose
 * real or effective uid is the target's real or saved uid: the real uid stays 0, so root's
 * processes stay reachable (a step before its setpriv has run), and the effective one reaches
 * `uid`'s (the step after it). So an instance ends a non-root agent's steps with CAP_SETUID, which
 * it keeps for setfsuid anyway, and no CAP_KILL, which would reach every process. The raw system
 * call changes only this thread (glibc's setresuid changes all). While the euid is not 0 the
 * kernel clears the thread's effective capabilities and moves its fsuid along; back at 0 they come
 * from the permitted set, and the fsuid in force before is put back. For uid 0, or in a process
 * that is not root, `fn` runs as is.
 */
export function asSender<T>(uid: number, fn: () => T): T {
  if (uid === 0 || Deno.uid() !== 0) return fn();
  const s = libc();
  const fsuid = s.setfsuid(QUERY) >>> 0;
  if (s.sys_setresuid(ARCH.SYS.setresuid, KEEP, BigInt(uid), KEEP) !== 0n) return fn(); // as we are
  try {
    return fn();
  } finally {
    // Always allowed: the real uid is 0. A thread left as `uid` would act as it for everything.
    if (s.sys_setresuid(ARCH.SYS.setresuid, KEEP, 0n, KEEP) !== 0n) {
      console.error(`cortexfs: cannot take back euid 0 after a signal sent as ${uid}`);
      Deno.exit(70);
    }
    s.setfsuid(fsuid);
  }
}
