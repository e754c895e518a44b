/** Follows one run's frames on a client connection: approvals answered, outcome summarized. */
import type { AgentClient, ClientFrame } from "./client.ts";

/** The outcome of one followed run. */
export interface Outcome {
  run?: string;
  status: "ok" | "error" | "cancelled" | "lost";
  /** errno of the last error frame, if any. */
  errno?: string;
  /** Assistant text (deltas, or the final message when there were none). */
  text: string;
  /** Tool result parts seen, in order. */
  results: { content: string; status?: string; errno?: string }[];
}

/** Hooks for {@link follow}. */
export interface FollowOptions {
  /** Tools answered `allow_once`; every other approval_request gets `deny`. */
  approve?: readonly string[];
  /** Every frame, as received. */
  onFrame?: (f: ClientFrame) => void;
  /** Called with the run id as soon as `start` arrives. */
  onStart?: (run: string) => void;
}

/** Reads frames until the run's `done` (or a request-level error), answering approvals. */
export async function follow(client: AgentClient, options: FollowOptions = {}): Promise<Outcome> {
  const out: Outcome = { status: "lost", text: "", results: [] };
  let deltas = false;
  for (;;) {
    const f = await client.next();
    if (!f) return out;
    options.onFrame?.(f);
    switch (f.type) {
      case "start":
        out.run = f.run;
        options.onStart?.(String(f.run));
        break;
      case "delta":
        deltas = true;
        out.text += String(f.text ?? "");
        break;
      case "message":
        if (f.role === "assistant" && !deltas) {
          out.text = (f.content as { text?: string }[]).map((p) => p.text ?? "").join("");
        } else if (f.role === "tool") {
          for (const p of f.content as { content: string; status?: string; errno?: string }[]) {
            out.results.push(p);
          }
        }
        break;
      case "approval_request": {
        const ok = options.approve?.includes(String(f.name)) ?? false;
        client.send({ op: "approve", run: f.run, id: f.id, decision: ok ? "allow_once" : "deny" });
        break;
      }
      case "error":
        out.errno = f.code;
        if (!f.run) { // a request-level error: no run follows
          out.status = "error";
          return out;
        }
        break;
      case "done":
        if (out.run === undefined || f.run === out.run) {
          out.run = f.run;
          out.status = f.status as Outcome["status"];
          return out;
        }
        break;
    }
  }
}

/** The process exit status for an outcome: 0 ok, 130 cancelled, else the errno's exit code. */
export function outcomeExit(o: Outcome, exitCode: (errno: string) => number): number {
  if (o.status === "ok") return 0;
  if (o.status === "cancelled") return 130;
  if (o.status === "lost") return 69;
  return o.errno ? exitCode(o.errno) : 1;
}
