/** Model-backed agents: the host renders messages, streams the driver, and records the outcome. */
import { toCtxError } from "../abi/errno.ts";
import { type ChatMessage, driverFor } from "../model/mod.ts";
import { readMessages, type SessionRef } from "../store/session.ts";
import type { Run } from "./recorder.ts";
import type { AgentView } from "./view.ts";

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

/** Earlier messages of the session (not of `run`), newest kept, within `maxBytes` of JSON; read as the owner. */
export function historyOf(ref: SessionRef, run: string, maxBytes: number): ChatMessage[] {
  const out: ChatMessage[] = [];
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
    const msg: ChatMessage = { role: m.role, content: textOf(m.content) };
    size += JSON.stringify(msg).length + 1;
    if (size > maxBytes) break;
    out.unshift(msg);
  }
  return out;
}

/** Runs one host-driven model turn to its outcome. */
export async function modelTurn(
  run: Run,
  options: { agent: AgentView; root: string; input: string },
): Promise<void> {
  const { agent, root, input } = options;
  let text = "";
  try {
    const driver = driverFor(root, agent.model);
    const messages: ChatMessage[] = [
      { role: "system", content: `You are the CortexFS agent ${agent.name}.` },
      ...historyOf(run.ref, run.id, 64 * 1024),
      { role: "user", content: input },
    ];
    for await (
      const ev of driver.stream({ model: agent.model, messages, signal: run.abort.signal })
    ) {
      if (run.finished) return;
      if (ev.type === "delta") {
        text += ev.text;
        await run.emit({ type: "delta", text: ev.text });
      } else await run.emit(ev);
    }
  } catch (e) {
    if (run.finished) return;
    const err = toCtxError(e);
    await run.emit({ type: "error", code: err.errno, message: err.message });
    return run.finish("error");
  }
  if (run.finished) return;
  const content = [{ type: "text" as const, text }];
  run.message({ role: "assistant", content });
  await run.emit({ type: "message", role: "assistant", content });
  await run.finish("ok", { latest: text });
}
