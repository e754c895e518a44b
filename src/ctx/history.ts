/** `ctx agent history`: a table of a session's runs, read from its events.jsonl (no socket needed). */
import type { Command } from "commander";
import { CtxError } from "../abi/errno.ts";
import { readRecords } from "../store/jsonl.ts";
import type { AgentContext } from "./agent.ts";
import { pickSession } from "./client.ts";
import { guarded } from "./fail.ts";

/** One row of the history table. */
export interface RunSummary {
  run: string;
  op: string;
  client_id: string;
  status: string;
  started: number;
  /** Seconds, null while active or interrupted without a done. */
  duration: number | null;
  tool_calls: number;
  errno: string | null;
}

/** Summarizes every run of a session dir's events.jsonl, oldest first. */
export function summarize(dir: string): RunSummary[] {
  const runs = new Map<string, RunSummary>();
  for (const r of readRecords(`${dir}/events.jsonl`)) {
    const e = r as Record<string, unknown>;
    const id = String(e.run ?? "");
    if (e.type === "start") {
      runs.set(id, {
        run: id,
        op: String(e.op ?? "send"),
        client_id: String(e.client_id ?? ""),
        status: "active",
        started: Number(e.ts ?? 0),
        duration: null,
        tool_calls: 0,
        errno: null,
      });
      continue;
    }
    const s = runs.get(id);
    if (!s) continue;
    if (e.type === "tool_call") s.tool_calls++;
    // A recoverable error (a failed fallback candidate) is not the run's outcome.
    else if (e.type === "error" && e.recoverable !== true) s.errno = String(e.code);
    else if (e.type === "done") {
      s.status = String(e.status);
      s.duration = Math.max(0, Number(e.ts ?? s.started) - s.started);
    }
  }
  return [...runs.values()];
}

/** Formats the table: RUN STATUS STARTED DURATION CALLS OP ERRNO. */
export function table(rows: RunSummary[]): string {
  const head = ["RUN", "STATUS", "STARTED", "DURATION", "CALLS", "OP", "ERRNO"];
  const body = rows.map((r) => [
    r.run,
    r.status,
    new Date(r.started * 1000).toISOString().replace(/\.\d+Z$/, "Z"),
    r.duration === null ? "-" : `${r.duration.toFixed(3)}s`,
    String(r.tool_calls),
    r.op,
    r.errno ?? "-",
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  return [head, ...body].map((row) => row.map((c, i) => c.padEnd(w[i])).join("  ").trimEnd())
    .join("\n");
}

/** Adds `history` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  agent
    .command("history")
    .description("list a session's runs: status, duration, tool calls")
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "session (default: index/current, then default)")
    .option("--json", "print JSON")
    .action((name: string, o: { session?: string; json?: boolean }) =>
      guarded(`agent/${name}`, async () => {
        const { loadAgent } = await import("../store/agent.ts");
        const root = ctx.root();
        const a = loadAgent(root, name, { secrets: false }); // only whose sessions
        const session = pickSession(root, a.uid, a.name, o.session);
        const dir = `${root}/home/${a.uid}/agent/${a.name}/session/${session}`;
        try {
          Deno.statSync(dir);
        } catch {
          throw new CtxError("ENOENT", `no session ${JSON.stringify(session)}`, { path: dir });
        }
        const rows = summarize(dir);
        console.log(o.json ? JSON.stringify(rows) : table(rows));
      })
    );
}
