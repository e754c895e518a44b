/** Mounting and unmounting: mount(2) as root, fusermount3 otherwise; dead mounts found and cleared. */
import { CtxError, ERRNO, ignore } from "../abi/errno.ts";
import { recvFd } from "../sys/fdpass.ts";
import * as libc from "../sys/libc.ts";

/** A mounted FUSE connection. */
export interface Mounted {
  /** The /dev/fuse fd to serve. */
  fd: number;
  /** How it was mounted. */
  via: "mount" | "fusermount";
  /** Mount point. */
  mountpoint: string;
}

/** Options for {@link mountFuse}. */
export interface MountOptions {
  /** Use fusermount3 (with auto_unmount) even as root. */
  fusermount?: boolean;
  /** fsname shown in /proc/mounts. */
  fsname?: string;
}

/** Decodes the octal escapes of /proc/self/mountinfo (`\040` = space). */
function unescape(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
}

/** The file system type mounted at `dir` (e.g. `fuse.cortexfs`), or null when none is. */
export function mountedType(dir: string): string | null {
  let text: string;
  try {
    text = Deno.readTextFileSync("/proc/self/mountinfo");
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return null;
  }
  let found: string | null = null;
  for (const line of text.split("\n")) {
    const f = line.split(" ");
    if (f.length < 10 || unescape(f[4]) !== dir) continue;
    const dash = f.indexOf("-");
    found = dash > 0 ? f[dash + 1] : "unknown"; // the last (topmost) mount wins
  }
  return found;
}

/**
 * Prepares `dir` for a new mount: a FUSE mount whose daemon died (ENOTCONN) is lazily unmounted
 * (returns "cleared"); a live FUSE mount is refused with EBUSY; otherwise "free".
 */
export function prepareMountpoint(dir: string): "free" | "cleared" {
  const type = mountedType(dir);
  if (type === null || !type.startsWith("fuse")) return "free";
  // Probe with a lookup that must reach the connection: a name never asked for before. A stat of
  // `dir` itself may be answered from the kernel's attribute cache for up to the attribute
  // timeout after the daemon died, and a restart in that window would take the dead mount for a
  // live one. A live daemon answers the probe ENOENT (or any errno but ENOTCONN).
  const probe = `${dir}/.cortexfs-probe-${crypto.randomUUID()}`;
  const st = libc.lstat(libc.cstr(probe), { follow: false });
  if (st === -ERRNO.ENOTCONN) {
    const r = libc.umount2(dir, libc.MNT.DETACH);
    if (r < 0 && r !== -ERRNO.EINVAL) {
      throw new CtxError("EBUSY", `dead mount cannot be cleared: errno ${-r}`, { path: dir });
    }
    return "cleared";
  }
  throw new CtxError(
    "EBUSY",
    `a live ${type} mount is already there; stop its daemon (or unmount it) first`,
    { path: dir },
  );
}

/** Mounts a FUSE file system at `dir`: mount(2) as root, else fusermount3 -o auto_unmount. */
export function mountFuse(dir: string, options: MountOptions = {}): Mounted {
  const fsname = options.fsname ?? "cortexfs";
  if (Deno.uid() === 0 && !options.fusermount) {
    const fd = libc.open(libc.cstr("/dev/fuse"), libc.O.RDWR);
    if (fd < 0) throw new CtxError("ENODEV", `cannot open /dev/fuse: errno ${-fd}`);
    const data = `fd=${fd},rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions`;
    const r = libc.mount(fsname, dir, {
      type: "fuse.cortexfs",
      flags: libc.MS.NOSUID | libc.MS.NODEV,
      data,
    });
    if (r < 0) {
      libc.close(fd);
      throw new CtxError("EIO", `mount(2) failed: errno ${-r}`, { path: dir });
    }
    return { fd, via: "mount", mountpoint: dir };
  }
  return viaFusermount(dir, fsname);
}

function viaFusermount(dir: string, fsname: string): Mounted {
  const pair = libc.socketpair();
  if (typeof pair === "number") throw new CtxError("EIO", `socketpair failed: errno ${-pair}`);
  const [ours, theirs] = pair;
  // Our end must not leak into any child: fusermount3 watches for its EOF to auto-unmount.
  libc.fcntl(ours, libc.F.SETFD, libc.F.FD_CLOEXEC);
  const opts = `allow_other,default_permissions,auto_unmount,fsname=${fsname},subtype=cortexfs`;
  let child: Deno.ChildProcess;
  try {
    // Its auto_unmount helper outlives the mount: never at the serving thread's real-time policy.
    child = libc.ordinary(() =>
      new Deno.Command("fusermount3", {
        args: ["-o", opts, "--", dir],
        env: { _FUSE_COMMFD: String(theirs) },
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn()
    );
  } finally {
    libc.close(theirs); // else recvmsg below would never see fusermount3 give up
  }
  const fd = recvFd(ours); // close-on-exec from its arrival
  if (fd < 0) {
    libc.close(ours);
    throw new CtxError("EIO", `fusermount3 did not pass a /dev/fuse fd (errno ${-fd})`, {
      path: dir,
    });
  }
  child.status.then(() => {}); // its auto_unmount helper lives on; do not keep the loop busy
  child.unref();
  return { fd, via: "fusermount", mountpoint: dir };
}

/**
 * Unmounts: a normal unmount, lazy when busy. Runs off the JS thread so this process keeps
 * answering the kernel while it unmounts its own mount.
 */
export async function unmountFuse(m: Mounted): Promise<"unmounted" | "lazy" | "gone"> {
  if (mountedType(m.mountpoint) === null) return "gone";
  if (Deno.uid() === 0) {
    if ((await libc.umount2Async(m.mountpoint, 0)) === 0) return "unmounted";
    if ((await libc.umount2Async(m.mountpoint, libc.MNT.DETACH)) === 0) return "lazy";
    return "gone";
  }
  const out = await libc.ordinary(() =>
    new Deno.Command("fusermount3", { args: ["-u", "-z", "--", m.mountpoint] }).output()
  );
  return out.success ? "lazy" : "gone";
}
