/** One terminal's life: the PTY program, its VT model, its recording and its socket, from spawn to `process.exit`. */
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import type { TerminalMeta } from "../abi/terminal.ts";
import { MAX_COLS, MAX_ROWS } from "../abi/terminal.ts";
import { asUser, type FsId } from "../sys/fsid.ts";
import type { ExitStatus, WinSize } from "../sys/pty.ts";
import { PtyChild } from "./child.ts";
import { Recorder } from "./record.ts";
import { HIGH_WATER, Screen } from "./screen.ts";
import { type ClientInfo, TermServer } from "./server.ts";

/** Bytes queued to one client above which the reader lets the event loop write them out. */
export const PACE_BACKLOG = 512 * 1024;

/** Grace between SIGHUP to the program's session and SIGKILL, when the terminal is stopped. */
export const STOP_GRACE_MS = 3000;

/** What {@link runTerminal} runs and where it records and listens. */
export interface TerminalOptions {
  /** The live socket path. */
  listen: string;
  /** A symlink made to point at the socket while it lives (the session's `terminal/main.sock`). */
  alias?: string;
  /** The resource directory (`.../session/<s>/terminal/<id>/`); none: nothing is recorded. */
  record?: string;
  /** Identity the resource files are written as (a root-run terminal writing a user's session). */
  as?: FsId;
  /** The program and its whole environment. */
  argv: string[];
  env: Record<string, string>;
  /** Fds the program inherits at their own numbers (a sandbox gate's: the view's). */
  inherit?: readonly number[];
  /** Host working directory of the program (default: ours). */
  cwd?: string;
  /** The cwd the resource shows (`/workspace` for a sandboxed shell); default `cwd`. */
  shownCwd?: string;
  /** Initial window size (the first attacher's replaces it). */
  size: WinSize;
  /** The command the resource shows (default `argv`: a sandbox launcher shows `tsh`). */
  shownCommand?: string[];
  /** Who may watch and attach besides root (default: our uid). */
  owner?: number;
  id?: string;
  agent?: string;
  session?: string;
  /** Called once the socket listens (ctxterm prints its ready line here). */
  ready?: (info: { socket: string; pid: number; child: number }) => void;
  /** Called with each closing fd holder: the sandbox view's fds, once the program is gone. */
  cleanup?: () => void;
}

/** Unix seconds. */
const unix = () => Math.floor(Date.now() / 1000);

/** Makes `alias` a symlink to `target` (temp + rename: never a moment without one once made). */
function linkAlias(alias: string, target: string): void {
  const tmp = `${alias}.tmp-${Deno.pid}`;
  try {
    Deno.removeSync(tmp);
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* none */
  }
  Deno.symlinkSync(target, tmp);
  Deno.renameSync(tmp, alias);
}

/** Removes `alias` if it still points at `target` (a newer terminal's alias is left alone). */
function unlinkAlias(alias: string, target: string): void {
  try {
    if (Deno.readLinkSync(alias) === target) Deno.removeSync(alias);
  } catch (e) {
    ignore(e, Deno.errors.NotFound, "EINVAL"); /* gone */
  }
}

/**
 * Runs a terminal until its program exits (or it is stopped by SIGTERM/SIGINT/SIGHUP: the
 * program's session gets SIGHUP, then SIGKILL after {@link STOP_GRACE_MS}); returns the program's
 * exit code. The recording ends with `process.exit` and state `exited` in either case.
 */
export async function runTerminal(o: TerminalOptions): Promise<number> {
  const owner = o.owner ?? Deno.uid() ?? 0;
  const id = o.id ?? o.record?.split("/").filter((s) => s).at(-1) ?? `t${Deno.pid}`;
  const meta: TerminalMeta = {
    id,
    agent: o.agent ?? "",
    session: o.session ?? "",
    owner: String(owner),
    cwd: o.shownCwd ?? o.cwd ?? Deno.cwd(),
    command: o.shownCommand ?? o.argv,
    state: "created",
    socket: o.listen,
    created_at: unix(),
    pid: Deno.pid,
    rows: o.size.rows,
    cols: o.size.cols,
  };
  const rec = o.record ? Recorder.create(o.record, meta, { as: o.as }) : null;
  let child: PtyChild;
  try {
    child = PtyChild.start({
      argv: o.argv,
      env: o.env,
      cwd: o.cwd,
      size: o.size,
      inherit: o.inherit,
    });
  } catch (e) {
    const err = toCtxError(e);
    rec?.setState("error", { error: `${err.errno}: ${err.message}`, ended_at: unix() });
    await rec?.close();
    o.cleanup?.();
    throw err;
  }
  const screen = new Screen(o.size);
  rec?.event({
    type: "terminal.start",
    command: o.shownCommand ?? o.argv,
    rows: o.size.rows,
    cols: o.size.cols,
    pid: child.pid,
  });
  rec?.setState("running", { child: child.pid });

  let server: TermServer;
  const resize = (size: WinSize, uid?: number) => {
    if (size.rows === child.size.rows && size.cols === child.size.cols) return;
    child.resize(size);
    screen.resize(size);
    rec?.event({ type: "pty.resize", rows: size.rows, cols: size.cols, uid });
    server?.size(size);
  };
  try {
    server = await TermServer.listen(o.listen, {
      owner,
      hooks: {
        hello: (c: ClientInfo) => ({
          id,
          mode: c.mode,
          client: c.id,
          rows: child.size.rows,
          cols: child.size.cols,
          pid: child.pid,
          agent: meta.agent,
          session: meta.session,
        }),
        snapshot: () => screen.snapshot(),
        input: (bytes) => void child.write(bytes),
        resize: (size, c) => resize(size, c.uid),
        attached: (c) =>
          rec?.event({ type: "client.attach", client: c.id, mode: c.mode, uid: c.uid, pid: c.pid }),
        detached: (c, reason, dropped) =>
          rec?.event({
            type: "client.detach",
            client: c.id,
            mode: c.mode,
            reason,
            ...(dropped ? { dropped_input: dropped } : {}),
          }),
      },
    });
  } catch (e) {
    child.signal("SIGKILL");
    const st = await child.exited;
    rec?.event({ type: "process.exit", exit_code: st.code, signal: st.signal, reason: "error" });
    rec?.setState("error", { error: String(e), exit_code: st.code, ended_at: unix() });
    await rec?.close();
    await child.close();
    o.cleanup?.();
    throw e;
  }
  const asOwner = <T>(fn: () => T): T => o.as ? asUser(o.as, fn) : fn();
  if (o.alias) asOwner(() => linkAlias(o.alias!, o.listen)); // checked just before
  o.ready?.({ socket: o.listen, pid: Deno.pid, child: child.pid });

  let stopReason: string | undefined;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const stop = (sig: string) => {
    if (stopReason) return;
    stopReason = sig.toLowerCase();
    child.signal("SIGHUP");
    child.signal("SIGCONT");
    killTimer = setTimeout(() => child.signal("SIGKILL"), STOP_GRACE_MS);
  };
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT", "SIGHUP"];
  const handlers = signals.map((s) => {
    const h = () => stop(s);
    Deno.addSignalListener(s, h);
    return [s, h] as const;
  });

  const pumped = child.pump((bytes) => {
    screen.feed(bytes);
    rec?.output(bytes);
    server.output(bytes);
    if (screen.backlog > HIGH_WATER) return screen.idle();
    // Sockets make progress only while the event loop turns: with output queued to a client,
    // give it a real turn (a timer) before the next read. Bounded: past MAX_CLIENT_BACKLOG that
    // client is dropped, so no client can hold the PTY back for long.
    if (server.backlog > PACE_BACKLOG) return new Promise((r) => setTimeout(r, 0));
  });
  const status: ExitStatus = await child.exited;
  await pumped;
  if (killTimer !== undefined) clearTimeout(killTimer);
  for (const [s, h] of handlers) Deno.removeSignalListener(s, h);
  // Clients hear the exit first (their detach records come before process.exit, the last record).
  if (o.alias) asOwner(() => unlinkAlias(o.alias!, o.listen)); // checked just before
  await server.close({ exit_code: status.code, signal: status.signal });
  rec?.event({
    type: "process.exit",
    exit_code: status.code,
    signal: status.signal,
    ...(stopReason ? { reason: stopReason } : {}),
  });
  rec?.setState("exited", { exit_code: status.code, signal: status.signal, ended_at: unix() });
  await rec?.close();
  await child.close();
  screen.dispose();
  o.cleanup?.();
  return status.code;
}

/** Parses `ROWSxCOLS` (e.g. `24x80`); EINVAL otherwise. */
export function parseSizeArg(s: string): WinSize {
  const m = /^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$/.exec(s);
  if (!m || Number(m[1]) > 65535 || Number(m[2]) > 65535) {
    throw new CtxError("EINVAL", `size "${s}" is not ROWSxCOLS`);
  }
  // The same bound as a client's resize (parseSize): the VT model's memory is rows x cols.
  return { rows: Math.min(Number(m[1]), MAX_ROWS), cols: Math.min(Number(m[2]), MAX_COLS) };
}
