/** Pseudo-terminals through libc: openpty, posix_spawn of a session leader on the slave, window size, waitpid, poll with a wake fd. */
import { libc } from "./ffi.ts";
import { close, cstr, errno, F, fcntl, O, read, write } from "./libc.ts";
import { POLL, PollFds } from "./poll.ts";

// Struct sizes on x86_64 glibc (platform-notes, "Pseudo-terminals").
const SPAWNATTR_SIZE = 336;
const FILE_ACTIONS_SIZE = 80;
const SIGSET_SIZE = 128;
const WINSIZE_SIZE = 8;

/** posix_spawnattr flags (glibc). */
const SPAWN = { SETSIGDEF: 0x04, SETSIGMASK: 0x08, SETSID: 0x80 } as const;
const TIOCSWINSZ = 0x5414n;
const TIOCGWINSZ = 0x5413n;
const EFD_NONBLOCK = O.NONBLOCK;
const EFD_CLOEXEC = O.CLOEXEC;

const sym = libc();

/** A window size in character cells. */
export interface WinSize {
  rows: number;
  cols: number;
}

function winsize(size: WinSize): Uint8Array {
  const b = new Uint8Array(WINSIZE_SIZE);
  const v = new DataView(b.buffer);
  v.setUint16(0, size.rows, true);
  v.setUint16(2, size.cols, true);
  return b;
}

/** An open pseudo-terminal pair: the master (ours) and the slave's device path. */
export interface PtyPair {
  master: number;
  slave: number;
  /** `/dev/pts/N`, opened again by the child so it becomes its controlling terminal. */
  name: string;
}

/** openpty(3) with the initial window size; both fds close-on-exec, the master non-blocking. Or -errno. */
export function openPty(size: WinSize): PtyPair | number {
  const m = new Int32Array(1), s = new Int32Array(1);
  const name = new Uint8Array(128);
  const r = sym.openpty(
    new Uint8Array(m.buffer),
    new Uint8Array(s.buffer),
    name,
    null,
    winsize(size),
  );
  if (r < 0) return -errno();
  const master = m[0], slave = s[0];
  for (const fd of [master, slave]) fcntl(fd, F.SETFD, F.FD_CLOEXEC);
  const fl = fcntl(master, F.GETFL);
  if (fl < 0 || fcntl(master, F.SETFL, fl | O.NONBLOCK) < 0) return -errno();
  const end = name.indexOf(0);
  return { master, slave, name: new TextDecoder().decode(name.subarray(0, end < 0 ? 0 : end)) };
}

/** What {@link spawnOnPty} starts. */
export interface SpawnSpec {
  /** Absolute path of the executable. */
  path: string;
  /** argv, argv[0] included. */
  argv: string[];
  /** The whole environment (`KEY=value` built from this map, nothing inherited). */
  env: Record<string, string>;
  /** Working directory of the child (default: ours). */
  cwd?: string;
  /** The slave device path the child opens as fds 0-2 (its controlling terminal). */
  tty: string;
  /**
   * Fds (above 2) the child inherits at their own numbers, close-on-exec or not here: a sandbox
   * gate's (src/sandbox/launch.ts `gate`), which closes every other fd it finds.
   */
  inherit?: readonly number[];
}

function ptrArray(strings: string[]): { array: Uint8Array; keep: Uint8Array[] } {
  const keep = strings.map((s) => cstr(s));
  const ptrs = new BigUint64Array(keep.length + 1);
  keep.forEach((b, i) => ptrs[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b))));
  return { array: new Uint8Array(ptrs.buffer), keep };
}

/** The fds from 3 up to the highest of `keep` that are not in it. */
function gaps(keep: readonly number[]): number[] {
  const out: number[] = [];
  for (let fd = 3; fd < Math.max(0, ...keep); fd++) if (!keep.includes(fd)) out.push(fd);
  return out;
}

/**
 * posix_spawn(3) of `spec` as the leader of a new session (POSIX_SPAWN_SETSID: glibc runs setsid
 * before the file actions) whose fd 0 is the slave opened by name (so it becomes the session's
 * controlling terminal), dup'd to 1 and 2; every other fd closed; signal mask empty and every
 * disposition default (Deno ignores SIGPIPE: a shell must not inherit that). The pid, or -errno.
 * `spec.inherit` stay open, at their numbers: only in the child, where a dup2 onto itself clears
 * FD_CLOEXEC (glibc >= 2.29, Austin Group issue 411; an older one would leave them closed at the
 * exec, and the sandbox gate fail closed), so here they never stop being close-on-exec, and no
 * other spawn can inherit them. Every other fd above 2 is closed (a close of one that is not open
 * is no error to glibc).
 */
export function spawnOnPty(spec: SpawnSpec): number {
  const keep = spec.inherit ?? [];
  if (keep.some((fd) => !Number.isInteger(fd) || fd <= 2)) return -22; // EINVAL
  const attr = new Uint8Array(SPAWNATTR_SIZE);
  const fa = new Uint8Array(FILE_ACTIONS_SIZE);
  const empty = new Uint8Array(SIGSET_SIZE), full = new Uint8Array(SIGSET_SIZE);
  sym.sigemptyset(empty);
  sym.sigfillset(full);
  let r = sym.posix_spawnattr_init(attr);
  if (r !== 0) return -r;
  r = sym.posix_spawn_file_actions_init(fa);
  if (r !== 0) {
    sym.posix_spawnattr_destroy(attr);
    return -r;
  }
  try {
    const steps = [
      () => sym.posix_spawnattr_setflags(attr, SPAWN.SETSID | SPAWN.SETSIGMASK | SPAWN.SETSIGDEF),
      () => sym.posix_spawnattr_setsigmask(attr, empty),
      () => sym.posix_spawnattr_setsigdefault(attr, full),
      () => sym.posix_spawn_file_actions_addopen(fa, 0, cstr(spec.tty), O.RDWR, 0),
      () => sym.posix_spawn_file_actions_adddup2(fa, 0, 1),
      () => sym.posix_spawn_file_actions_adddup2(fa, 0, 2),
      ...keep.map((fd) => () => sym.posix_spawn_file_actions_adddup2(fa, fd, fd)),
      ...gaps(keep).map((fd) => () => sym.posix_spawn_file_actions_addclose(fa, fd)),
      () => sym.posix_spawn_file_actions_addclosefrom_np(fa, Math.max(2, ...keep) + 1),
      ...(spec.cwd ? [() => sym.posix_spawn_file_actions_addchdir_np(fa, cstr(spec.cwd!))] : []),
    ];
    for (const step of steps) {
      r = step();
      if (r !== 0) return -r;
    }
    const argv = ptrArray(spec.argv);
    const envp = ptrArray(Object.entries(spec.env).map(([k, v]) => `${k}=${v}`));
    const pid = new Int32Array(1);
    // posix_spawn returns the error number itself (errno is not set).
    r = sym.posix_spawn(
      new Uint8Array(pid.buffer),
      cstr(spec.path),
      fa,
      attr,
      argv.array,
      envp.array,
    );
    void argv.keep, envp.keep; // the strings must live until the call returned
    return r === 0 ? pid[0] : -r;
  } finally {
    sym.posix_spawn_file_actions_destroy(fa);
    sym.posix_spawnattr_destroy(attr);
  }
}

/** ioctl(TIOCSWINSZ): the kernel sends SIGWINCH to the terminal's foreground process group. 0 or -errno. */
export function setWinSize(fd: number, size: WinSize): number {
  return sym.ioctl(fd, TIOCSWINSZ, winsize(size)) < 0 ? -errno() : 0;
}

/** ioctl(TIOCGWINSZ): the terminal's window size, or -errno. */
export function getWinSize(fd: number): WinSize | number {
  const b = new Uint8Array(WINSIZE_SIZE);
  if (sym.ioctl(fd, TIOCGWINSZ, b) < 0) return -errno();
  const v = new DataView(b.buffer);
  return { rows: v.getUint16(0, true), cols: v.getUint16(2, true) };
}

/** How a child ended: its exit code, or the signal that killed it (code 128 + signal). */
export interface ExitStatus {
  code: number;
  signal: number | null;
}

/** Waits (on a worker thread) for `pid` to exit and reaps it; null when it is not our child. */
export async function waitPid(pid: number): Promise<ExitStatus | null> {
  const st = new Int32Array(1);
  const buf = new Uint8Array(st.buffer);
  for (let i = 0; i < 1000; i++) {
    const r = await sym.waitpid(pid, buf, 0);
    if (r === pid) {
      const s = st[0];
      const sig = s & 0x7f;
      if (sig === 0) return { code: (s >> 8) & 0xff, signal: null };
      if (sig !== 0x7f) return { code: 128 + sig, signal: sig };
      continue; // stopped (not asked for; never reported without WUNTRACED)
    }
    // -1: EINTR (retry) or ECHILD (errno is unreadable after a nonblocking call: bounded retries)
    if (r < 0 && i > 3) return null;
  }
  return null;
}

/**
 * A poll(2) set of one data fd and one wake fd (an eventfd), run off the JS thread. Each instance
 * owns its buffer: one poll in flight per instance.
 */
export class Poller {
  readonly wakeFd: number;
  #set = new PollFds(2);
  #one = new BigUint64Array([1n]);
  #drain = new Uint8Array(8);

  constructor(readonly fd: number) {
    const w = sym.eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w < 0) throw new Error(`eventfd failed (errno ${errno()})`);
    this.wakeFd = w;
  }

  /** Waits until `fd` has any of `events` (or hangs up), or {@link wake} was called; the fd's revents. */
  async wait(events: number, timeoutMs = -1): Promise<number> {
    const p = this.#set;
    p.set(0, this.fd, events);
    p.set(1, this.wakeFd, POLL.IN);
    const r = await sym.poll(p.buf, p.count, timeoutMs);
    if (r <= 0) return 0;
    if (p.revents(1) !== 0) read(this.wakeFd, this.#drain);
    return p.revents(0);
  }

  /** Makes a pending (or the next) {@link wait} return at once. */
  wake(): void {
    write(this.wakeFd, new Uint8Array(this.#one.buffer));
  }
}

/** Closes the poller's wake fd (only once no wait is in flight). */
export function closePoller(p: Poller): void {
  close(p.wakeFd);
}
