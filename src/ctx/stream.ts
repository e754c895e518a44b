/** Follows one run's frames on a client connection: approvals answered, outcome summarized. */
import { CtxError } from "../abi/errno.ts";
import { encodeFrame, MAX_FRAME } from "../abi/line.ts";
import type { AgentClient, ClientFrame } from "./client.ts";

/** The outcome of one followed run. */
export interface Outcome {
  run?: string;
  status: "ok" | "error" | "cancelled" | "lost";
  /** errno of the last error frame, if any. */
  errno?: string;
  /** The answer: the last step's deltas, or its assistant message when it streamed none. */
  text: string;
  /** Tool result parts seen, in order. */
  results: { content: string; status?: string; errno?: string }[];
}

/**
 * Sends a request frame after checking its size here: the server answers an oversized line with
 * an id-less EMSGSIZE (it cannot read the id), which {@link follow} does not take as its own.
 */
export function sendRequest(
  client: AgentClient,
  frame: { op: string; id: string; [k: string]: unknown },
): void {
  const bytes = new TextEncoder().encode(encodeFrame(frame)).length;
  if (bytes > MAX_FRAME) {
    throw new CtxError(
      "EMSGSIZE",
      `the ${frame.op} frame is ${bytes} bytes; a frame is at most ${MAX_FRAME} bytes`,
    );
  }
  client.send(frame);
}

/** Hooks for {@link follow}. */
export interface FollowOptions {
  /** The request id sent; only an error frame carrying it (and no `run`) ends the follow. */
  id?: string;
  /** Tools answered `allow_once`; every other approval_request gets `deny` (unless `decide`). */
  approve?: readonly string[];
  /**
   * Answers a live approval_request (true: allow_once); replaces the `approve` list. Undefined
   * sends no answer (the run is being cancelled: the cancel ends the approval).
   */
  decide?: (f: ClientFrame) => boolean | undefined | Promise<boolean | undefined>;
  /** Every frame, as received. */
  onFrame?: (f: ClientFrame) => void;
  /** Called with the run id as soon as `start` arrives. */
  onStart?: (run: string) => void;
}

/**
 * Reads frames until the run's `done` (or the request's own error), answering approvals. Only
 * live approval requests are answered: a frame marked `replay` belongs to a run this connection
 * did not start (a repeated request id), and only the run's origin connection can answer it.
 */
export async function follow(client: AgentClient, options: FollowOptions = {}): Promise<Outcome> {
  const out: Outcome = { status: "lost", text: "", results: [] };
  let deltas = false;
  // An id-less error (refused connection, stray frame) does not end the follow, but when the
  // connection then closes it is why: the outcome is that error, not "lost".
  let stray: string | undefined;
  for (;;) {
    const f = await client.next();
    if (!f) {
      if (out.run === undefined && stray !== undefined) {
        return { ...out, status: "error", errno: stray };
      }
      return out;
    }
    options.onFrame?.(f);
    switch (f.type) {
      case "start":
        out.run = f.run;
        options.onStart?.(String(f.run));
        break;
      case "delta":
        // A step's deltas are its answer text; a new step (after a tool result) starts afresh.
        if (!deltas) out.text = "";
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
          deltas = false;
        }
        break;
      case "approval_request": {
        if (f.replay === true) break; // not ours to answer (see above)
        const ok = options.decide
          ? await options.decide(f)
          : options.approve?.includes(String(f.name)) ?? false;
        if (ok === undefined) break;
        client.send({ op: "approve", run: f.run, id: f.id, decision: ok ? "allow_once" : "deny" });
        break;
      }
      case "error":
        if (f.run) {
          // A run error; `done` follows. A recoverable one (a failed fallback candidate) is not
          // the outcome.
          if (f.recoverable !== true) out.errno = f.code;
        } else if (options.id !== undefined && f.id === options.id) {
          return { ...out, status: "error", errno: f.code }; // our request failed: no run follows
        } else if (f.id === undefined) stray = f.code;
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
