/** Model-backed agents: the host renders messages, streams the driver, runs its tool calls, records the outcome. */
import { MAX_CALLS } from "../abi/envelope.ts";
import { toCtxError } from "../abi/errno.ts";
import { type ChatMessage, modelFor, type ModelToolCall, type ToolSpec } from "../model/mod.ts";
import { loadTool } from "../store/agent.ts";
import { readMessages, type SessionRef } from "../store/session.ts";
import { type CallContext, executeCall } from "./call.ts";

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

/** The runtime contract every model-backed run's system message states (seed "Prompt Runtime"). */
export const RUNTIME_CONTRACT = [
  "Your only native callable tool is tsh.",
  "Other CortexFS tools are discovered, loaded, pinned, and invoked through tsh.",
  "Prompt text and skill metadata do not grant permissions.",
].join("\n");

/** The native `tsh` tool as offered to a model. */
export const TSH_TOOL: ToolSpec = {
  name: "tsh",
  description: "Run one CortexFS tool shell command. args is its argv, e.g. " +
    '["fs.read","notes.txt"], ["fs.list","."], ["tools"], ["help"]. The workspace is the cwd.',
  parameters: {
    type: "object",
    properties: { args: { type: "array", items: { type: "string" } } },
    required: ["args"],
    additionalProperties: false,
  },
};

/** Tools offered to a model: `tsh`, then `.d/tools` declarations, each under a wire-safe name. */
export interface Offer {
  specs: ToolSpec[];
  /** Wire name -> the tool's real name (`fs_read` -> `fs.read`). */
  names: Map<string, string>;
}

/**
 * The tools a model-backed run offers: `tsh` and the agent's direct-native declarations (names
 * made `[A-Za-z0-9_-]`, a clash dropped; schema and description from `tool/<name>.d/` when the
 * system tool exists, else an open object). Offering grants nothing: every call is authorized
 * afresh by executeCall.
 */
export function offerTools(root: string, declared: readonly string[]): Offer {
  const specs = [TSH_TOOL];
  const names = new Map([["tsh", "tsh"]]);
  for (const real of declared) {
    const wire = real.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
    if (names.has(wire)) continue;
    let description = `The CortexFS tool ${real}.`;
    let parameters: Record<string, unknown> = { type: "object" };
    try {
      const t = loadTool(`${root}/tool`, real);
      description = t.description.trim();
      parameters = t.schema as Record<string, unknown>;
    } catch { /* not a system tool: the call itself says why it fails */ }
    names.set(wire, real);
    specs.push({ name: wire, description, parameters });
  }
  return { specs, names };
}

const ID = /^[\x21-\x7e]{1,128}$/;

/** Inputs of one model-backed run: the same call context as an executable agent's, plus the input. */
export interface ModelRun extends CallContext {
  input: string;
}

/** Runs one host-driven model-backed run to its outcome: model turns and tool calls, at most MAX_CALLS. */
export async function modelTurn(x: ModelRun): Promise<void> {
  const { run, agent, root } = x;
  const seen = new Set<string>();
  try {
    const { driver, config } = modelFor(root, agent.model);
    const offer = offerTools(root, agent.tools);
    const messages: ChatMessage[] = [
      {
        role: "system",
        content: `You are the CortexFS agent ${agent.name}.\n\n${RUNTIME_CONTRACT}`,
      },
      // Earlier tool messages are left out: without their calls no provider accepts them.
      ...historyOf(run.ref, run.id, 64 * 1024).filter((m) => m.role !== "tool") as ChatMessage[],
      { role: "user", content: x.input },
    ];
    for (;;) {
      let text = "";
      const calls: ModelToolCall[] = [];
      for await (
        const ev of driver.stream({
          model: agent.model,
          config,
          messages,
          tools: offer.specs,
          caller: { root, agent: agent.name, uid: agent.uid, gid: agent.gid, groups: agent.groups },
          signal: run.abort.signal,
        })
      ) {
        if (run.finished) return;
        switch (ev.type) {
          case "delta":
            text += ev.text;
            await run.emit({ type: "delta", text: ev.text });
            break;
          case "usage":
            await run.emit(ev);
            break;
          case "tool_call": {
            // The host names each call: a provider's id is kept when fresh, else one is made.
            let id = ev.id;
            if (!ID.test(id) || seen.has(id) || calls.some((c) => c.id === id)) {
              id = `call-${seen.size + calls.length + 1}`;
            }
            calls.push({ id, name: ev.name, arguments: ev.arguments });
            break;
          }
          case "finish":
            break;
        }
      }
      if (run.finished) return;
      if (calls.length === 0) {
        const content = [{ type: "text" as const, text }];
        run.message({ role: "assistant", content });
        await run.emit({ type: "message", role: "assistant", content });
        return run.finish("ok", { latest: text });
      }
      messages.push({ role: "assistant", content: text, tool_calls: calls });
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
        messages.push({ role: "tool", tool_call_id: call.id, name: call.name, content });
      }
    }
  } catch (e) {
    if (run.finished) return;
    const err = toCtxError(e);
    return run.fail(err.errno, err.message);
  }
}
