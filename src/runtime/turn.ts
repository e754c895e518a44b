/** Model-backed agents: the host renders the prompt, admits it to the window, streams the model (with fallback), runs its tool calls, records the outcome. */
import { errorOf } from "../abi/frames.ts";
import { MAX_CALLS } from "../abi/envelope.ts";
import { toCtxError } from "../abi/errno.ts";
import type { ChatMessage, ModelToolCall } from "../model/mod.ts";
import { MAX_RUN_OUTPUT, MAX_TURN_OUTPUT, tooBig } from "../model/driver.ts";
import { candidatesOf } from "../model/fallback.ts";
import { admit, turnsOf } from "../prompt/admit.ts";
import { offerTools } from "../prompt/offer.ts";
import { readMessages } from "../store/session/files.ts";
import type { SessionRef } from "../store/session/ref.ts";
import { type CallContext, executeCall } from "./call.ts";
import { promptOf, snapshot } from "./prompt.ts";

export { RUNTIME_CONTRACT } from "../abi/prompt.ts";
export { type Offer, offerTools, TSH_TOOL } from "../prompt/offer.ts";
export { toolContextOf } from "./prompt.ts";

/** Text of a stored message's content (string or parts). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => {
    const part = p as { text?: unknown; content?: unknown };
    return typeof part.text === "string"
      ? part.text
      : typeof part.content === "string"
      ? part.content
      : "";
  }).join("");
}

/** One earlier message as the envelope's history carries it. */
export interface HistoryMessage {
  role: "user" | "assistant" | "tool";
  content: string;
}

/** Earlier messages of the session (not of `run`), newest kept, within `maxBytes` of JSON; read as the owner. */
export function historyOf(ref: SessionRef, run: string, maxBytes: number): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  let size = 2;
  const all = readMessages(ref) as {
    role?: string;
    run?: string;
    content?: unknown;
  }[];
  for (let i = all.length - 1; i >= 0; i--) {
    const m = all[i];
    if (m.run === run || (m.role !== "user" && m.role !== "assistant" && m.role !== "tool")) {
      continue;
    }
    const msg: HistoryMessage = { role: m.role, content: textOf(m.content) };
    size += JSON.stringify(msg).length + 1;
    if (size > maxBytes) break;
    out.unshift(msg);
  }
  return out;
}

const ID = /^[\x21-\x7e]{1,128}$/;

/** Inputs of one model-backed run: the same call context as an executable agent's, plus the input and cwd. */
export interface ModelRun extends CallContext {
  input: string;
  /** The run's cwd as the agent sees it (`/workspace/sub`). */
  cwd: string;
}

/** Earlier user and assistant messages as whole turns (tool messages are left out: their calls are not kept). */
function historyTurns(ref: SessionRef, run: string): ChatMessage[][] {
  const all = historyOf(ref, run, Infinity).filter((m) => m.role !== "tool");
  return turnsOf(all as ChatMessage[]);
}

/**
 * Runs one host-driven model-backed run to its outcome. The prompt is rendered fresh
 * (src/prompt), then every model call goes to the first candidate that can take it: the agent's
 * model, then its `fallback` chain; a candidate that is missing, window-ineligible, cannot admit
 * the request (E2BIG), or fails before any output is recorded as a recoverable `error` frame
 * naming it (when another candidate follows) and is not asked again in this run. The user message
 * is recorded once the first request is admitted: a run that no candidate can take records only
 * its error. At most MAX_CALLS tool calls.
 */
export async function modelTurn(x: ModelRun): Promise<void> {
  const { run, agent, root } = x;
  const seen = new Set<string>();
  try {
    const candidates = candidatesOf(root, agent);
    const prompt = promptOf(x, candidates.find((c) => !c.fault)?.window);
    const offer = offerTools(root, agent.tools);
    const system: ChatMessage = { role: "system", content: prompt.system };
    const history = historyTurns(run.ref, run.id);
    const current: ChatMessage[] = [{ role: "user", content: x.input }];
    let recorded = false;
    let from = 0;
    // Characters the run's turns streamed (text, reasoning, tool-call arguments): bounded per
    // turn and per run, so a hostile stream ends the run E2BIG instead of filling memory.
    let total = 0;
    for (;;) {
      let text = "";
      let calls: ModelToolCall[] = [];
      for (let i = from;; i++) {
        const c = candidates[i];
        const last = i === candidates.length - 1;
        text = "";
        calls = [];
        let output = false;
        let usage: { type: "usage"; input_tokens: number; output_tokens: number } | undefined;
        let size = 0;
        const grow = (n: number) => {
          size += n;
          if (size > MAX_TURN_OUTPUT) throw tooBig("turn output", MAX_TURN_OUTPUT);
          if (total + size > MAX_RUN_OUTPUT) throw tooBig("run output", MAX_RUN_OUTPUT);
        };
        try {
          if (c.fault) throw c.fault;
          const { messages } = admit(
            { system, history, current, tools: offer.specs },
            c.window,
            c.ref,
          );
          if (!recorded) {
            recorded = true;
            run.message({ role: "user", content: x.input });
            snapshot(run.ref, prompt);
          }
          // deno-lint-ignore no-non-null-assertion
          const driver = c.driver!; // a candidate without a fault was resolved
          for await (
            const ev of driver.stream({
              model: c.ref,
              config: c.config,
              messages,
              tools: offer.specs,
              caller: {
                root,
                agent: agent.name,
                uid: agent.uid,
                gid: agent.gid,
                groups: agent.groups,
              },
              signal: run.abort.signal,
            })
          ) {
            if (run.finished) return;
            switch (ev.type) {
              case "delta":
                output = true;
                grow(ev.text.length);
                text += ev.text;
                await run.emit({ type: "delta", text: ev.text });
                break;
              case "reasoning_delta":
                output = true;
                grow(ev.text.length);
                await run.emit({ type: "reasoning_delta", text: ev.text });
                break;
              case "usage":
                // Recorded with the turn's stop reason when the driver sends one (after usage).
                if (usage) await run.emit(usage);
                usage = ev;
                break;
              case "tool_call": {
                output = true;
                grow(JSON.stringify(ev.arguments).length);
                // The host names each call: a provider's id is kept when fresh, else one is made.
                let id = ev.id;
                if (!ID.test(id) || seen.has(id) || calls.some((k) => k.id === id)) {
                  id = `call-${seen.size + calls.length + 1}`;
                }
                calls.push({ id, name: ev.name, arguments: ev.arguments });
                break;
              }
              case "finish":
                if (usage) await run.emit({ ...usage, stop: ev.reason });
                usage = undefined;
                break;
            }
          }
          if (usage) await run.emit(usage);
          total += size;
          from = i;
          break;
        } catch (e) {
          if (run.finished) return;
          const err = toCtxError(e);
          // Output already shown cannot be taken back: no other candidate answers this turn.
          if (output || last) {
            const named = candidates.length > 1 ? `model ${c.ref}: ` : "";
            return run.fail(err.errno, `${named}${err.message}`);
          }
          await run.emit(
            errorOf(
              err.errno,
              `model ${c.ref} failed; trying ${candidates[i + 1].ref}: ${err.message}`,
              { model: c.ref, recoverable: true },
            ),
          );
        }
      }
      if (run.finished) return;
      if (calls.length === 0) {
        const content = [{ type: "text" as const, text }];
        run.message({ role: "assistant", content });
        await run.emit({ type: "message", role: "assistant", content });
        return run.finish("ok", { latest: text });
      }
      current.push({ role: "assistant", content: text, tool_calls: calls });
      for (const call of calls) {
        if (seen.size >= MAX_CALLS) {
          return run.fail("E2BIG", `more than ${MAX_CALLS} tool calls in one run`);
        }
        seen.add(call.id);
        const real = offer.names.get(call.name) ?? call.name;
        const { obs, errno } = await executeCall(x, { ...call, name: real });
        if (run.finished) return;
        const content = obs.status === "ok"
          ? obs.content
          : `error${errno ? ` ${errno}` : ""}: ${obs.content}`;
        current.push({ role: "tool", tool_call_id: call.id, name: call.name, content });
      }
    }
  } catch (e) {
    if (run.finished) return;
    const err = toCtxError(e);
    return run.fail(err.errno, err.message);
  }
}
