/** The socket ops: send, tsh, resume, cancel (approve is consumed inside a run's approval wait). */
import { createHash } from "node:crypto";
import { CtxError, toCtxError } from "../abi/errno.ts";
import {
  errorOf,
  fitFrame,
  type Frame,
  replayOf,
  type Request,
  type RunStatus,
  type Scope,
  sessionName,
} from "../abi/frames.ts";
import { MAX_CONTEXT, utf8Length } from "../abi/envelope.ts";
import type { RunIndex } from "../store/runs.ts";
import {
  checkSession,
  openSession,
  readEvents,
  readMessages,
  readSessionFile,
  readState,
  sessionExists,
} from "../store/session/files.ts";
import { currentSession, touchIndex } from "../store/session/index.ts";
import { asOwner, sessionBase, type SessionRef, sessionRef } from "../store/session/ref.ts";
import { admitUid, checkOwner } from "./admit.ts";
import { executeCall } from "./call.ts";
import type { Conn } from "./conn.ts";
import { execLoop } from "./exec.ts";
import { groupsDir } from "./groups.ts";
import { historyOf, modelTurn, textOf, toolContextOf } from "./turn.ts";
import type { Workspace } from "./peer.ts";
import type { Presence } from "./presence.ts";
import { newRunId, Run } from "./recorder.ts";
import type { ToolHost } from "./tools.ts";
import { type AgentView, readAgent } from "./view.ts";

/** Shared state of one runtime, handed to every op. */
export interface OpContext {
  root: string;
  run: string;
  index: RunIndex;
  host: ToolHost;
  approvalTimeoutMs: number;
  /** The daemon's CTX_TOOL_CACHE (validated at start), passed to every runTsh. */
  toolCache?: string;
  /** The FUSE mount projecting `root`, when there is one. */
  mount?: string;
  /** Live runs by run id. */
  active: Map<string, Run>;
  /** Per-session-dir serialization: runs of one session never overlap. */
  locks: Map<string, Promise<unknown>>;
  /** Sessions startup could not read or close (dir -> why): every request to them answers EIO. */
  broken: Map<string, string>;
  /** The agents' status/pid projections. */
  presence: Presence;
  /** Live connections per peer uid (capped in server.ts). */
  peers: Map<number, number>;
  /** Hears every connection open and close (an instance's idle clock). */
  changed?: () => void;
  /**
   * The workspace of the peer of accepted connection `fd` (SO_PEERCRED pid `pid`), or why the
   * peer is refused: checked here (src/runtime/peer.ts) or, in an instance, by its host.
   */
  workspaceOf(fd: number, pid: number): Promise<Workspace>;
}

type SendReq = Extract<Request, { op: "send" }>;
type TshReq = Extract<Request, { op: "tsh" }>;

/**
 * The check at accept time: only the `owner` control is read (a peer that may not talk to the
 * agent is turned away at once); every request then runs the full {@link authorizePeer}.
 */
export function admitPeer(ctx: OpContext, name: string, conn: Conn): void {
  admitUid(ctx.root, name, conn.peer.uid);
}

/** Re-reads the agent and re-checks the peer on every request: authority never carries over. */
export function authorizePeer(ctx: OpContext, name: string, conn: Conn): AgentView {
  const agent = readAgent(ctx.root, name);
  checkOwner(conn.peer.uid, name, agent.owner);
  return agent;
}

function digestOf(v: unknown): string {
  return "sha256:" + createHash("sha256").update(JSON.stringify(v)).digest("hex");
}

async function locked<T>(ctx: OpContext, key: string, fn: () => Promise<T>): Promise<T> {
  const prev = ctx.locks.get(key) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const tail = next.catch(() => {});
  ctx.locks.set(key, tail);
  try {
    return await next;
  } finally {
    if (ctx.locks.get(key) === tail) ctx.locks.delete(key);
  }
}

/** EIO for a session startup found broken: the runtime never writes to (or "repairs") it. */
function refuseBroken(ctx: OpContext, ref: SessionRef): void {
  const why = ctx.broken.get(ref.dir);
  if (why === undefined) return;
  throw new CtxError(
    "EIO",
    `session ${ref.dir} is broken (${why}); it is not served until it is repaired and the daemon restarts`,
    { path: ref.dir },
  );
}

/**
 * Replays a stored run's frames (and, if it is still live here, follows it to its end). Every
 * frame sent this way carries `"replay":true` (wire copy only; events.jsonl is unchanged): this
 * connection is not the run's origin, so an `approval_request` among them is not its to answer.
 */
async function replay(ctx: OpContext, conn: Conn, ref: SessionRef, run: string): Promise<void> {
  const stored = readEvents(ref).filter((f) => (f as { run?: string }).run === run);
  const live = ctx.active.get(run);
  if (!live || live.finished) {
    for (const f of stored) await conn.send(replayOf(f as Frame));
    return;
  }
  // Snapshot and subscription in one synchronous step (emit writes, then streams once durable):
  // every frame is either in the replayed part of the snapshot (streamed before the follower
  // joined, so durable) or broadcast to this connection, never both, never neither; the replay
  // is queued on the socket before any later broadcast, so the order holds.
  const n = live.follow(conn);
  await Promise.all(stored.slice(0, n).map((f) => conn.send(replayOf(f as Frame))));
  await live.wait();
}

async function begin(
  ctx: OpContext,
  conn: Conn,
  o: { agent: AgentView; session: string; scope: SendReq["scope"]; cwd: string; id: string },
  op: "send" | "tsh",
  payload: unknown,
  body: (run: Run) => Promise<void>,
): Promise<void> {
  const ref = refOf(ctx, o.agent, o.session, o.scope);
  refuseBroken(ctx, ref);
  const digest = digestOf(payload);
  await locked(ctx, ref.dir, async () => {
    const prior = ctx.index.lookup(ref.dir, o.id);
    if (prior) {
      if (prior.digest !== digest) {
        throw new CtxError(
          "EINVAL",
          `request id "${o.id}" was already used with a different payload`,
        );
      }
      return replay(ctx, conn, ref, prior.run);
    }
    // Waited behind another run of the session and its client is gone: nothing to start for.
    if (conn.closed) return;
    openSession(ref, { model: o.agent.model });
    // A FIFO, symlink or device planted among its files: EIO naming it, before anything is written.
    checkSession(ref);
    touchIndex(ref, o.cwd);
    // The agent's status goes back to `ready` when the run's end is recorded, before its `done`
    // is sent (a client that saw `done` reads `ready`), or at the latest when the body returns.
    let live = true;
    const end = () => {
      if (!live) return;
      live = false;
      return ctx.presence.end(o.agent.name);
    };
    const run = new Run({ id: newRunId(), ref, index: ctx.index, origin: conn, onEnd: end });
    const ts = Date.now() / 1000;
    ctx.active.set(run.id, run);
    // `busy` is written (by the host, for an instance) before `start` goes out; `start` is
    // appended and fsynced meanwhile.
    const busy = ctx.presence.begin(o.agent.name);
    try {
      // start first: it carries the digest the index is rebuilt from.
      await run.emit({
        type: "start",
        id: run.id,
        client_id: o.id,
        op,
        session: o.session,
        scope: o.scope,
        cwd: o.cwd,
        digest,
        ts,
      }, { after: busy });
      ctx.index.begin({ run: run.id, dir: ref.dir, client_id: o.id, digest, started: ts });
      if (o.scope === "temp") conn.onClose(() => void run.cancel());
      try {
        await body(run);
      } catch (e) {
        const err = toCtxError(e);
        await run.emit(errorOf(err.errno, err.message));
      }
      await run.finish("error"); // no-op when the body already recorded the outcome
    } finally {
      ctx.active.delete(run.id);
      await end();
      ctx.changed?.(); // the run is gone from `active` only now: the idle clock may start
    }
  });
}

/**
 * The session a request names; for `null`, its scope's `index/current` (read as the session
 * owner; a name there that is not a session name counts as none), else `default`: the rule ctx
 * follows for a command without `--session`, applied here so a client need not read the index
 * first (ctx send sends `null`).
 */
function sessionOf(ctx: OpContext, agent: AgentView, scope: Scope, session: string | null): string {
  if (session !== null) return session;
  if (scope === "temp") return "default"; // temp sessions are never indexed
  const ref = refOf(ctx, agent, "default", scope);
  const current = asOwner(ref, () => currentSession(ref.base));
  return current !== undefined && sessionName.safeParse(current).success ? current : "default";
}

/** The one reference a request's session operations take: `agent`'s session, as its identity. */
function refOf(ctx: OpContext, agent: AgentView, session: string, scope: Scope): SessionRef {
  return sessionRef({
    root: ctx.root,
    run: ctx.run,
    agent: agent.name,
    session,
    scope,
    uid: agent.uid,
    gid: agent.gid,
    groups: agent.groups,
  });
}

function checkCwd(cwd: string): string {
  if (cwd.split("/").some((c) => c === "..")) {
    throw new CtxError("EINVAL", `cwd ${JSON.stringify(cwd)} contains ".."`);
  }
  return cwd;
}

/** `send`: records the user message, then drives the model or the executable agent. */
export async function opSend(ctx: OpContext, conn: Conn, name: string, req: SendReq) {
  const agent = authorizePeer(ctx, name, conn);
  if (agent.exec && agent.abi !== "sdk-envelope-v1") {
    throw new CtxError(
      "EINVAL",
      `agent ${name} is executable but its abi is ${JSON.stringify(agent.abi)}`,
    );
  }
  // The envelope's bound is checked before anything is recorded: an input the agent could never
  // receive is refused as a request, not recorded and then failed as a run.
  if (agent.exec && utf8Length(req.input) > MAX_CONTEXT) {
    throw new CtxError(
      "EMSGSIZE",
      `input is ${utf8Length(req.input)} bytes; agent ${name} is executable (sdk-envelope-v1) ` +
        `and takes at most ${MAX_CONTEXT} bytes of input`,
    );
  }
  const cwd = checkCwd(req.cwd ?? agent.cwd);
  const session = sessionOf(ctx, agent, req.scope, req.session);
  const payload = { op: "send", input: req.input, scope: req.scope, cwd };
  await begin(
    ctx,
    conn,
    { agent, session, scope: req.scope, cwd, id: req.id },
    "send",
    payload,
    async (run) => {
      // A model-backed run records the user message itself, once its first request is admitted
      // to the window: a request no model can take records only its error.
      if (agent.exec) run.message({ role: "user", content: req.input });
      // Model-backed or executable, tool calls take the same path with the same context.
      const call = {
        run,
        host: ctx.host,
        agent,
        root: ctx.root,
        workspace: conn.workspace,
        hidden: [ctx.run],
        mount: ctx.mount,
        session,
        approvalTimeoutMs: ctx.approvalTimeoutMs,
        toolCache: ctx.toolCache,
        cancel: (id: string) => cancelOn(ctx, conn, name, id),
      };
      if (!agent.exec) {
        run.activate();
        return modelTurn({ ...call, input: req.input, cwd });
      }
      const history = JSON.stringify(historyOf(run.ref, run.id, 60 * 1024));
      await execLoop({
        ...call,
        groups: groupsDir(ctx.run),
        log: (lines) => ctx.presence.log(agent.name, lines),
        input: req.input,
        history,
        toolContext: toolContextOf(ctx.root, agent),
      });
    },
  );
}

/** `tsh`: one tool-shell command through the authority path, without a model call. */
export async function opTsh(ctx: OpContext, conn: Conn, name: string, req: TshReq) {
  const agent = authorizePeer(ctx, name, conn);
  const payload = { op: "tsh", args: req.args };
  const session = sessionOf(ctx, agent, "private", req.session);
  const o = { agent, session, scope: "private" as const, cwd: agent.cwd, id: req.id };
  await begin(ctx, conn, o, "tsh", payload, async (run) => {
    run.activate();
    // The human typed this command: approval (a guard on agent-originated calls) does not apply.
    const { obs, errno } = await executeCall({
      run,
      host: ctx.host,
      agent: { ...agent, approval: "auto" },
      root: ctx.root,
      workspace: conn.workspace,
      hidden: [ctx.run],
      mount: ctx.mount,
      session,
      approvalTimeoutMs: ctx.approvalTimeoutMs,
      toolCache: ctx.toolCache,
    }, { id: "call-1", name: "tsh", arguments: { args: req.args } });
    if (obs.status === "ok") return run.finish("ok", { latest: obs.content });
    // The tool's own errno (EACCES for a refused call, ENOENT for an unknown tool...); a tool
    // that ran and failed has none: EIO.
    await run.fail(errno ?? "EIO", "the tsh command failed", { tool: obs.name });
  });
}

/** `resume`: the stored conversation of a private (else shared) session, then its status. */
export async function opResume(
  ctx: OpContext,
  conn: Conn,
  name: string,
  named: string | null,
) {
  const agent = authorizePeer(ctx, name, conn);
  const session = sessionOf(ctx, agent, "private", named);
  for (const scope of ["private", "shared"] as const) {
    const ref = refOf(ctx, agent, session, scope);
    // Everything below is read as the session's owner: a symlink the owner planted reaches only
    // what the owner could read anyway (never another user's history through root).
    if (!sessionExists(ref)) continue;
    refuseBroken(ctx, ref);
    checkSession(ref);
    const messages = readMessages(ref) as Record<string, unknown>[];
    const runs = new Set<string>();
    for (const m of messages) {
      runs.add(String(m.run));
      const content = m.role === "user" ? m.content : textOf(m.content);
      // A message too long for one 1 MiB frame is cut here and marked; the file keeps it whole.
      await conn.send(
        fitFrame(typeof content === "string" ? content : JSON.stringify(content), (text, cut) => ({
          type: "history" as const,
          session,
          role: m.role as "user" | "assistant" | "tool", // messages.jsonl holds only these
          run: String(m.run),
          content: typeof content === "string" || cut ? text : content,
          ...(cut ? { truncated: true as const } : {}),
        })),
      );
    }
    const updated = readSessionFile(ref, "updated_at")?.trim() ?? "";
    await conn.send({
      type: "status",
      session,
      scope,
      status: readState(ref),
      runs: runs.size,
      updated_at: updated,
    });
    return;
  }
  throw new CtxError(
    "ENOENT",
    `no private or shared session ${JSON.stringify(session)} for agent ${name}`,
  );
}

/** The `cancel` op as the server dispatches it: a refusal becomes an error frame with the id. */
export async function cancelOn(ctx: OpContext, conn: Conn, name: string, id: string) {
  try {
    await opCancel(ctx, conn, name, id);
  } catch (e) {
    const err = toCtxError(e);
    await conn.send(errorOf(err.errno, err.message, { id }));
  }
}

/** `cancel`: durable cancellation of an active run of this agent; answers with an ack. */
export async function opCancel(ctx: OpContext, conn: Conn, name: string, id: string) {
  const agent = authorizePeer(ctx, name, conn);
  const live = ctx.active.get(id);
  // Runs of other agents are invisible here, whatever the id.
  const bases = (["private", "shared", "temp"] as const).map((scope) =>
    sessionBase({ root: ctx.root, run: ctx.run, uid: agent.uid, agent: name, scope }) + "/"
  );
  const mine = (dir: string) => bases.some((b) => dir.startsWith(b));
  if (live && mine(live.ref.dir)) {
    await live.cancel();
    return conn.send({ type: "ack", op: "cancel", run: id, status: live.status ?? "cancelled" });
  }
  const row = ctx.index.get(id);
  if (!row || !mine(row.dir)) {
    throw new CtxError("ENOENT", `no run ${JSON.stringify(id)} of agent ${name}`);
  }
  // The index stores only the statuses a run can have (src/store/runs.ts).
  await conn.send({
    type: "ack",
    op: "cancel",
    run: id,
    status: row.status as RunStatus | "active",
  });
}
