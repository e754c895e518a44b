/** The `debug-script` driver behind `debug/script`: replays a scripted turn per model call, offline. */
import { z } from "zod";
import { CtxError, ERRNO } from "../abi/errno.ts";
import { readRegular } from "../store/regular.ts";
import { asOwner } from "../store/session/ref.ts";
import type { Driver, ModelEvent, ModelRequest } from "./driver.ts";

/** The script file's default name, inside the agent home, when `default` has no `script=`. */
export const DEFAULT_SCRIPT = "script.jsonl";
/** Largest script file read. */
export const MAX_SCRIPT = 1024 * 1024;

const callSchema = z.strictObject({
  id: z.string().regex(/^[\x21-\x7e]{1,128}$/).optional(),
  name: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()),
});

/** One scripted turn (one line of the script). */
export const turnSchema = z.strictObject({
  text: z.union([z.string(), z.array(z.string())]).optional(),
  tool_calls: z.array(callSchema).max(16).optional(),
  usage: z.strictObject({
    input_tokens: z.number().int().nonnegative(),
    output_tokens: z.number().int().nonnegative(),
  }).optional(),
  error: z.strictObject({
    code: z.string().refine((c) => Object.hasOwn(ERRNO, c), "not a known errno name"),
    message: z.string(),
  }).optional(),
});

/** A scripted turn. */
export type Turn = z.infer<typeof turnSchema>;

/** Parses a script: one JSON turn per line; blank lines and lines starting with `#` are skipped. */
export function parseScript(text: string, path = "script"): Turn[] {
  const out: Turn[] = [];
  text.split("\n").forEach((line, i) => {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) return;
    let raw: unknown;
    try {
      raw = JSON.parse(t);
    } catch {
      throw new CtxError("EINVAL", `${path} line ${i + 1} is not JSON`, { path });
    }
    const p = turnSchema.safeParse(raw);
    if (!p.success) {
      const issue = p.error.issues[0];
      throw new CtxError(
        "EINVAL",
        `${path} line ${i + 1}: ${issue?.path.join(".") || "turn"}: ${issue?.message}`,
        { path },
      );
    }
    out.push(p.data);
  });
  return out;
}

/** Reads the caller's script as the caller (owner uid), a regular file only, bounded. */
function readScript(request: ModelRequest): { turns: Turn[]; name: string } {
  const c = request.caller;
  if (!c) throw new CtxError("EINVAL", "the debug-script driver needs the calling agent");
  const name = request.config?.defaults.script ?? DEFAULT_SCRIPT;
  const path = `${c.root}/home/${c.uid}/agent/${c.agent}/${name}`;
  const bytes = asOwner(c, () => readRegular(path, { max: MAX_SCRIPT + 1 }));
  if (!bytes) {
    throw new CtxError("ENOENT", `no script: home/${c.uid}/agent/${c.agent}/${name} is missing`, {
      path,
    });
  }
  if (bytes.length > MAX_SCRIPT) {
    throw new CtxError("EFBIG", `the script is over ${MAX_SCRIPT} bytes`, { path });
  }
  return { turns: parseScript(new TextDecoder().decode(bytes), name), name };
}

/** Which model call of the run this is: assistant turns since the last user message. */
function turnIndex(request: ModelRequest): number {
  const m = request.messages;
  let n = 0;
  for (let i = m.length - 1; i >= 0 && m[i].role !== "user"; i--) {
    if (m[i].role === "assistant") n++;
  }
  return n;
}

/** `{{input}}`: the last user message; `{{result}}`: the content of the last tool message. */
function fill(text: string, request: ModelRequest): string {
  const input = request.messages.findLast((m) => m.role === "user")?.content ?? "";
  const result = request.messages.findLast((m) => m.role === "tool")?.content ?? "";
  return text.replaceAll("{{input}}", input).replaceAll("{{result}}", result);
}

/** Replays turn N of the script for the Nth model call of a run (N counted from 0). */
export const scriptDriver: Driver = {
  name: "debug-script",
  async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
    const { turns, name } = readScript(request);
    const n = turnIndex(request);
    const turn = turns[n];
    if (!turn) {
      throw new CtxError("ENODATA", `${name} has ${turns.length} turns; call ${n + 1} has none`);
    }
    if (turn.error) throw new CtxError(turn.error.code as keyof typeof ERRNO, turn.error.message);
    const parts = typeof turn.text === "string" ? [turn.text] : turn.text ?? [];
    let out = 0;
    for (const p of parts) {
      if (request.signal.aborted) return;
      const text = fill(p, request);
      out += text.length;
      if (text !== "") yield { type: "delta", text };
      await Promise.resolve(); // a cancel can land between deltas
    }
    const calls = turn.tool_calls ?? [];
    for (const [i, c] of calls.entries()) {
      if (request.signal.aborted) return;
      yield {
        type: "tool_call",
        id: c.id ?? `script-${n + 1}-${i + 1}`,
        name: c.name,
        arguments: c.arguments,
      };
    }
    const input = request.messages.reduce((s, m) => s + m.content.length, 0);
    yield {
      type: "usage",
      ...(turn.usage ??
        { input_tokens: Math.ceil(input / 4), output_tokens: Math.ceil(out / 4) }),
    };
    yield { type: "finish", reason: calls.length ? "tool_calls" : "stop" };
  },
};
