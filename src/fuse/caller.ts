/** Running a backing call as the user who asked: the request's uid and gid as this thread's fsuid/fsgid, groups when needed. */
import { ERRNO, ignore } from "../abi/errno.ts";
import { asUser } from "../sys/fsid.ts";
import type { Request } from "./conn.ts";

const E = ERRNO;

/** The supplementary groups of process `pid` (`Groups:` in /proc/<pid>/status), or [] when it is gone. */
function groupsOf(pid: number): number[] {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/status`);
    const line = text.match(/^Groups:[ \t]*(.*)$/m)?.[1] ?? "";
    return line.split(/\s+/).filter((s) => s !== "").map(Number);
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return [];
  }
}

/** `CAP_MKNOD` (linux/capability.h). */
export const CAP_MKNOD = 27;

/**
 * Whether process `pid` holds capability `cap` in its effective set (`CapEff:` in
 * /proc/<pid>/status) in this daemon's user namespace: a capability held only inside a user
 * namespace of its own grants nothing in the backing tree. False when the process is gone.
 */
export function holdsCap(pid: number, cap: number): boolean {
  if (pid <= 0) return false;
  try {
    if (Deno.readLinkSync(`/proc/${pid}/ns/user`) !== Deno.readLinkSync("/proc/self/ns/user")) {
      return false;
    }
    const text = Deno.readTextFileSync(`/proc/${pid}/status`);
    const hex = text.match(/^CapEff:[ \t]*([0-9a-f]+)$/m)?.[1];
    return hex !== undefined && ((BigInt(`0x${hex}`) >> BigInt(cap)) & 1n) === 1n;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
}

/**
 * Runs `fn` (a synchronous backing call answering 0/fd or -errno) with the caller's filesystem
 * identity: what it creates is born the caller's, and a name swapped under it by the caller can
 * only lead to what the caller could reach anyway. Defence in depth behind backing.ts, which
 * already keeps every call inside the tree and off symlinks.
 *
 * First without supplementary groups (no /proc read on the common path); when that is refused
 * (EACCES/EPERM) and the caller has groups, once more with them (a failed call changed nothing).
 * Root asking as root:root runs as is.
 */
export function asCaller(req: Request, fn: () => number): number {
  const { uid, gid, pid } = req;
  if (uid === 0 && gid === 0) return fn();
  const r = asUser({ uid, gid, groups: [] }, fn);
  if ((r !== -E.EACCES && r !== -E.EPERM) || pid <= 0) return r;
  const groups = groupsOf(pid);
  return groups.length === 0 ? r : asUser({ uid, gid, groups }, fn);
}
