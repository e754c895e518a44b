/** `ctx terminal create|list|status|watch|attach|replay` and `ctx agent watch|attach`: the human paths into a persistent terminal. */
import type { Command } from "commander";
import { CtxError, ignore } from "../abi/errno.ts";
import type { ClientMode } from "../abi/terminal.ts";
import { join } from "../term/client.ts";
import {
  findTerminal,
  readTerminalEvents,
  resolveSocket,
  type SessionPlace,
} from "../term/locate.ts";
import { type Found, listTerminals } from "../store/terminals.ts";
import { replay } from "../term/replay.ts";
import { type AgentContext, TERMINAL_HELP } from "./agent.ts";
import { pickSession } from "./client.ts";
import { guarded } from "./fail.ts";
import { runDirOf } from "./instance.ts";

const uid = () => Deno.uid() ?? 0;

/**
 * Joins a session's live terminal (socket found in the seed's order) and exits with the
 * result: the process must not linger on the stdin read a detach leaves pending.
 */
async function joinSession(
  place: SessionPlace,
  mode: ClientMode,
  env: Record<string, string | undefined>,
  id?: string,
  first?: string[],
): Promise<number> {
  const { path, conn } = await resolveSocket(place, env, { first });
  return await join({ socket: path, conn, mode, id });
}

/**
 * The host's own socket for a supervised terminal of `agent`'s `session`,
 * `<run>/terminal/<agent>/<session>/main.sock` (root's 0711 directory: no user can put another
 * server there), when a host serves the tree; tried before the alias a user may repoint.
 */
function hostTerminal(root: string, agent: string, session: string): string[] {
  try {
    return [`${runDirOf(root, agent)}/terminal/${agent}/${session}/main.sock`];
  } catch (e) {
    ignore(e, "EHOSTDOWN");
    return [];
  }
}

/** Runs a join under `guarded` and then exits (a pending stdin read would keep ctx alive). */
async function exiting(path: string, body: () => Promise<number>): Promise<void> {
  await guarded(path, body);
  Deno.exit(typeof Deno.exitCode === "number" ? Deno.exitCode : 0);
}

/** Whether a terminal's socket answers now (its meta names it). */
async function live(f: Found): Promise<boolean> {
  if (f.meta.state !== "running") return false;
  try {
    const c = await Deno.connect({ transport: "unix", path: f.meta.socket });
    c.close();
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.ConnectionRefused, Deno.errors.PermissionDenied);
    return false;
  }
}

function when(unix: number | undefined): string {
  return unix === undefined ? "-" : new Date(unix * 1000).toISOString().replace(/\.\d+Z$/, "Z");
}

/** Adds `watch` and `attach` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  for (const mode of ["watch", "attach"] as const) {
    agent
      .command(mode)
      .description(
        mode === "watch"
          ? "watch the agent's persistent terminal, read-only (Ctrl+] or Ctrl+C leaves)"
          : "join the agent's persistent terminal, read-write (Ctrl+] detaches)",
      )
      .argument("<agent>", "agent name")
      .option("-s, --session <name>", "session (default: index/current, then default)")
      .action((name: string, o: { session?: string }) =>
        exiting(`agent/${name}`, async () => {
          const root = ctx.root();
          // Sessions live in the agent identity's home (where `ctx terminal create` records).
          const { loadAgent } = await import("../store/agent.ts");
          const owner = loadAgent(root, name, { secrets: false }).uid;
          const session = pickSession(root, owner, name, o.session);
          const place = { root, uid: owner, agent: name, session };
          return await joinSession(
            place,
            mode,
            ctx.env,
            undefined,
            hostTerminal(root, name, session),
          );
        })
      );
  }
}

/** `ctx terminal list`: your agents' terminals, as a table or JSON lines. */
async function printList(
  root: string,
  agent: string | undefined,
  o: { session?: string; json?: boolean },
): Promise<void> {
  const found = listTerminals(root, uid(), { agent, session: o.session });
  if (o.json) {
    for (const f of found) console.log(JSON.stringify({ dir: f.dir, ...f.meta }));
    return;
  }
  const rows = [["ID", "AGENT", "SESSION", "STATE", "LIVE", "CREATED", "EXIT"]];
  for (const f of found) {
    rows.push([
      f.meta.id,
      f.meta.agent,
      f.meta.session,
      f.meta.state,
      (await live(f)) ? "yes" : "no",
      when(f.meta.created_at),
      f.meta.exit_code === undefined ? "-" : String(f.meta.exit_code),
    ]);
  }
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(w[i])).join("  ").trimEnd());
}

/** `ctx terminal status`: one terminal's metadata, its socket's liveness and its record's length. */
async function printStatus(root: string, ref: string, json?: boolean): Promise<void> {
  const f = findTerminal(root, uid(), ref);
  const { events, torn } = readTerminalEvents(f.dir);
  const info = {
    dir: f.dir,
    ...f.meta,
    live: await live(f),
    events: events.length,
    last_seq: events.at(-1)?.seq ?? 0,
    torn,
  };
  if (json) return console.log(JSON.stringify(info));
  for (const [k, v] of Object.entries(info)) {
    console.log(`${k}=${Array.isArray(v) ? v.join(" ") : v}`);
  }
}

/** `ctx terminal replay`: a terminal's recorded output on stdout, with its timing. */
async function replayTerminal(
  root: string,
  ref: string,
  o: { speed: string; wait: boolean; maxWait: string },
): Promise<void> {
  const speed = Number(o.speed), maxWait = Number(o.maxWait);
  if (!(speed > 0) || !(maxWait >= 0)) {
    throw new CtxError("EINVAL", "--speed must be > 0 and --max-wait >= 0");
  }
  const f = findTerminal(root, uid(), ref);
  const { events, torn } = readTerminalEvents(f.dir);
  await replay(events, {
    speed,
    maxWait,
    noWait: !o.wait,
    write: (b) => {
      for (let off = 0; off < b.length;) off += Deno.stdout.writeSync(b.subarray(off));
    },
  });
  if (torn) {
    console.error(`ctx: note: ${f.dir}/events.jsonl ends in a torn record (left out)`);
  }
}

/** Adds the `ctx terminal` group to the program. */
export function registerTerminal(program: Command, ctx: AgentContext): void {
  const t = program.command("terminal").description(TERMINAL_HELP);
  t.command("create")
    .description("start AGENT's terminal: ctxterm -> bwrap sandbox -> tsh, recorded in the session")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("--cwd <path>", "host directory bound at /workspace (default: the current directory)")
    .action((name: string, o: { session?: string; cwd?: string }) =>
      guarded(`agent/${name}`, async () => {
        const { createTerminal } = await import("../term/launch.ts");
        const root = ctx.root();
        const session = pickSession(root, uid(), name, o.session);
        const r = await createTerminal({
          root,
          uid: uid(),
          agent: name,
          session,
          workspace: o.cwd ?? Deno.cwd(),
          env: ctx.env,
        });
        console.log(`${r.id}\t${r.dir}\t${r.socket}`);
      })
    );
  t.command("list")
    .description("list terminal resources of your agents (read-only; starts nothing)")
    .argument("[agent]", "only this agent")
    .option("-s, --session <name>", "only this session")
    .option("--json", "print JSON lines")
    .action((agent: string | undefined, o: { session?: string; json?: boolean }) =>
      guarded("terminal", () => printList(ctx.root(), agent, o))
    );
  t.command("status")
    .description("print one terminal's metadata and whether its socket is live (read-only)")
    .argument("<terminal>", "terminal id, or its resource directory")
    .option("--json", "print JSON")
    .action((ref: string, o: { json?: boolean }) =>
      guarded(ref, () => printStatus(ctx.root(), ref, o.json))
    );
  for (const mode of ["watch", "attach"] as const) {
    t.command(mode)
      .description(
        mode === "watch"
          ? "watch a live terminal, read-only (Ctrl+] or Ctrl+C leaves)"
          : "join a live terminal, read-write (Ctrl+] detaches)",
      )
      .argument("[terminal]", "terminal id, or its resource directory")
      .option("--socket <path>", "join the terminal serving this socket (no lookup)")
      .action((ref: string | undefined, o: { socket?: string }) =>
        exiting(ref ?? o.socket ?? "terminal", async () => {
          if (o.socket) return await join({ socket: o.socket, mode, id: ref });
          if (!ref) throw new CtxError("EINVAL", `ctx terminal ${mode} needs TERMINAL or --socket`);
          const root = ctx.root();
          const f = findTerminal(root, uid(), ref);
          const place = { root, uid: uid(), agent: f.meta.agent, session: f.meta.session };
          return await joinSession(place, mode, ctx.env, f.meta.id);
        })
      );
  }
  t.command("replay")
    .description("print a terminal's recorded output with its timing (like scriptreplay)")
    .argument("<terminal>", "terminal id, or its resource directory")
    .option("--speed <factor>", "playback speed factor", "1")
    .option("--no-wait", "print everything at once")
    .option("--max-wait <seconds>", "longest pause between two chunks", "2")
    .action((ref: string, o: { speed: string; wait: boolean; maxWait: string }) =>
      guarded(ref, () => replayTerminal(ctx.root(), ref, o))
    );
}
