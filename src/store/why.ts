/** Reads the mount's `user.cortexfs.refused` of a control: why the caller's last write of it was refused (spec/fuse.md). */
import { ERRNO } from "../abi/errno.ts";
import { Dir, xattrBuf } from "../sys/dir.ts";

const NAME = new TextEncoder().encode("user.cortexfs.refused\0");

/**
 * The reason line, `null` when none is kept for the caller, `"unsupported"` when `path` is not on
 * the mount (a storage tree keeps no reasons), or -errno (the path cannot be looked at).
 */
export function refusedWhy(path: string): string | null | "unsupported" | number {
  const slash = path.lastIndexOf("/");
  let dir: Dir;
  try {
    dir = new Dir(path.slice(0, slash) || "/");
  } catch {
    // Dir throws one plain Error for any failed open(2): the reason is not ours to give.
    return -ERRNO.ENOENT;
  }
  try {
    const name = new TextEncoder().encode(`${path.slice(slash + 1)}\0`);
    const n = dir.getxattr({ fd: dir.fd, name }, NAME);
    if (n === -ERRNO.ENODATA) return null;
    if (n === -ERRNO.ENOTSUP) return "unsupported";
    if (n < 0) return n;
    return new TextDecoder().decode(xattrBuf.subarray(0, n));
  } finally {
    dir.close();
  }
}
