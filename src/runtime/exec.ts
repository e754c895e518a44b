/** The sdk-envelope-v1 host loop: bounded steps of an executable agent, each maybe yielding one call. */
import {
  type AgentFrame,
  agentFrame,
  encodeInvocation,
  ENVELOPE_SCHEMA,
  MAX_CALLS,
  MAX_STARTS,
  type Observation,
} from "../abi/envelope.ts";
import { MAX_FRAME } from "../abi/frames.ts";
import { type CallContext, executeCall, type ToolCall } from "./call.ts";
import { agentEnv } from "../sandbox/env.ts";
import { spawnSandbox } from "../sandbox/launch.ts";
import { loadAgent } from "../store/agent.ts";
import { prepareView } from "../tool/view.ts";
import { dropGroup, recordGroup } from "./groups.ts";
import { GRACE_MS, reapGroup, stopGroup } from "./proc.ts";

/** Total stdout one step may print before it is cut off (EMSGSIZE). */
const MAX_STEP_OUTPUT = 8 * 1024 * 1024;
const U32_MAX = 0xffffffff;

/** Inputs of one logical run of an executable agent. */
export interface ExecRun extends CallContext {
  input: string;
  /** Bounded JSON text of earlier messages (at most 64 KiB). */
  history: string;
  /** Bounded loaded-tool context text. */
  toolContext: string;
  /** Where live process groups are recorded (`<run>/groups`). */
  groups: string;
  /** Appends LF-terminated lines to the agent's `log` (its stderr, stamped). */
  log?: (lines: string) => void;
}

type StepEnd =
  | {
    kind: "final";
    text: string;
    error?: { code: string; message: string };
    code: number;
    /** The last lines the step printed on stderr (for the error frame of a failed step). */
    stderr: string;
  }
  | { kind: "yield"; call: ToolCall; code: number }
  | { kind: "invalid"; reason: string }
  | { kind: "cancelled" };

/** The complete environment of a step: `.d/env`, then the runtime-owned CTX_* values on top. */
export function stepEnv(x: ExecRun, step: number): Record<string, string> {
  const env: Record<string, string> = { ...x.agent.env };
  env.CTX_AGENT = x.agent.name;
  env.CTX_SESSION = x.session;
  env.CTX_RUN_ID = x.run.id;
  env.CTX_AGENT_STEP = String(step);
  env.CTX_AGENT_STEPS = String(MAX_STARTS);
  delete env.CTX_CONTEXT_WINDOW_TOKENS;
  delete env.CTX_CONTEXT_WINDOW_CHARS;
  if (x.agent.window !== undefined) {
    env.CTX_CONTEXT_WINDOW_TOKENS = String(Math.min(x.agent.window, U32_MAX));
    env.CTX_CONTEXT_WINDOW_CHARS = String(Math.min(x.agent.window * 4, U32_MAX));
  }
  return env;
}

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string | "OVERSIZED"> {
  const dec = new TextDecoder();
  let buf = "";
  let total = 0;
  for await (const chunk of stream) {
    total += chunk.length;
    if (total > MAX_STEP_OUTPUT) {
      yield "OVERSIZED";
      return;
    }
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
    if (buf.length > MAX_FRAME) {
      yield "OVERSIZED";
      return;
    }
  }
  buf += dec.decode();
  if (buf.trim() !== "") yield buf; // a last frame without its newline still counts
}

/** A started step: the agent's definition, its view and its sandboxed process. */
interface Started {
  def: ReturnType<typeof loadAgent>;
  view: ReturnType<typeof prepareView>;
  sandbox: ReturnType<typeof spawnSandbox>;
}

/**
 * Starts step `n`'s process. The agent runs in the same view as its tools, as the agent identity:
 * controls re-read, binds granted by policy, the workspace by fd, private state and history out of
 * reach, limits set, network only when policy grants it. A refusal starts nothing.
 */
function launchStep(x: ExecRun, n: number): Started {
  const root = Deno.realPathSync(x.root);
  const def = loadAgent(root, x.agent.name);
  const view = prepareView(def, {
    root,
    uid: def.uid,
    workspace: x.workspace,
    hidden: x.hidden,
    mount: x.mount,
  });
  try {
    const base = agentEnv({
      agent: def.name,
      subject: def.subject,
      uid: def.uid,
      ctxPath: def.path,
    });
    const sandbox = spawnSandbox({
      ...view.spec,
      env: { ...base, ...stepEnv(x, n) },
      command: [`/ctx/agent/${def.name}`],
    }, { stderr: "piped" });
    return { def, view, sandbox };
  } catch (e) {
    view.close();
    throw e;
  }
}

/** One stdout line as an agent frame, or why it is not one. */
function parseFrame(line: string): AgentFrame | { invalid: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return { invalid: "stdout line is not JSON" };
  }
  const p = agentFrame.safeParse(raw);
  if (p.success) return p.data;
  const t = (raw as { type?: unknown })?.type;
  return {
    invalid: typeof t === "string" && !["delta", "message", "tool_call", "error"].includes(t)
      ? `agents may not emit "${t}" frames`
      : `malformed ${JSON.stringify(t ?? "")} frame: ${p.error.issues[0]?.message}`,
  };
}

/** What a step printed, read frame by frame until its stdout ends or a frame breaks the rules. */
interface Printed {
  /** Set when the step broke the envelope's rules (the rest is then ignored). */
  end?: StepEnd;
  text: string;
  messages: string[];
  error?: { code: string; message: string };
  call?: ToolCall;
}

/** Reads the step's frames from `stdout`, passing deltas on as they come. */
async function readFrames(x: ExecRun, stdout: ReadableStream<Uint8Array>): Promise<Printed> {
  const { run } = x;
  const out: Printed = { text: "", messages: [] };
  for await (const line of lines(stdout)) {
    if (run.finished) break; // cancelled: record nothing more
    if (line === "OVERSIZED") {
      out.end = { kind: "invalid", reason: "a frame exceeds 1 MiB or a step printed over 8 MiB" };
      break;
    }
    if (line.trim() === "") continue;
    if (out.call) {
      out.end = { kind: "invalid", reason: "a frame after the yielded tool_call" };
      break;
    }
    const frame = parseFrame(line);
    if ("invalid" in frame) {
      out.end = { kind: "invalid", reason: frame.invalid };
      break;
    }
    switch (frame.type) {
      case "delta":
        out.text += frame.text;
        await run.emit({ type: "delta", text: frame.text });
        break;
      case "message":
        out.messages.push(
          typeof frame.content === "string"
            ? frame.content
            : frame.content.map((p) => p.text).join(""),
        );
        break;
      case "error":
        out.error = { code: frame.code, message: frame.message };
        break;
      case "tool_call":
        out.call = { id: frame.id, name: frame.name, arguments: frame.arguments };
        break;
    }
  }
  return out;
}

async function step(x: ExecRun, n: number, obs: Observation | null): Promise<StepEnd> {
  const { run } = x;
  if (run.finished) return { kind: "cancelled" };
  const stdin = encodeInvocation({
    schema: ENVELOPE_SCHEMA,
    run: run.id,
    step: n,
    input: x.input,
    history_messages: x.history,
    tool_context: x.toolContext,
    observation: obs,
  });
  const { def, view, sandbox } = launchStep(x, n);
  const { child } = sandbox;
  // stderr is drained as it comes (a full pipe would stall the agent) and its tail kept.
  const err = stderrTail(child.stderr);
  let receipt: string | undefined;
  const onAbort = () => void stopGroup(child, GRACE_MS, def.uid);
  run.abort.signal.addEventListener("abort", onAbort);
  try {
    // Recorded before the envelope is written: an agent does nothing before it reads stdin, so
    // a daemon killed from here on leaves a receipt the next start uses to stop the group.
    const recorded = recordGroup(x.groups, child.pid, {
      run: run.id,
      agent: x.agent.name,
      step: n,
    });
    run.activate(); // while the agent is still inside execve (see Run.activate)
    receipt = await recorded;
    const w = child.stdin.getWriter();
    await w.write(stdin).catch(() => {});
    await w.close().catch(() => {});
    const { end, text, messages, error, call } = await readFrames(x, child.stdout);
    if (end || run.finished) {
      await stopGroup(child, GRACE_MS, def.uid);
      return run.finished ? { kind: "cancelled" } : end!; // end is set when not cancelled
    }
    const status = await child.status;
    if (run.finished) return { kind: "cancelled" };
    if (call) return { kind: "yield", call, code: status.code };
    return {
      kind: "final",
      text: messages.length ? messages.join("\n") : text,
      error,
      code: status.code,
      stderr: lastLines(await err, ERROR_STDERR),
    };
  } finally {
    run.abort.signal.removeEventListener("abort", onAbort);
    reapGroup(child, def.uid);
    await child.status;
    if (receipt) dropGroup(receipt);
    view.close();
    sandbox.cleanup();
    const tail = await err;
    const stamp = `${new Date().toISOString()} ${run.id} step ${n}: `;
    x.log?.(tail.split("\n").filter((l) => l !== "").map((l) => stamp + l + "\n").join(""));
  }
}

/** Bytes of a step's stderr kept (its tail) for the agent's log. */
const STDERR_KEEP = 16 * 1024;
/** Bytes of that tail an error frame quotes. */
const ERROR_STDERR = 1024;

/** Drains `stream`, keeping its last {@link STDERR_KEEP} bytes as text. */
async function stderrTail(stream: ReadableStream<Uint8Array>): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  try {
    for await (const chunk of stream) {
      text += dec.decode(chunk, { stream: true });
      if (text.length > 2 * STDERR_KEEP) text = text.slice(-STDERR_KEEP);
    }
  } catch {
    /* any kind: the tail is diagnostics, what came is what there is (the process is gone) */
  }
  return text.slice(-STDERR_KEEP);
}

/** The whole last lines of `text` within `max` characters. */
function lastLines(text: string, max: number): string {
  const t = text.trimEnd();
  if (t.length <= max) return t;
  const cut = t.indexOf("\n", t.length - max);
  return cut < 0 ? t.slice(-max) : t.slice(cut + 1);
}

/** Drives the run to its single host-written outcome (`done`), step by step. */
export async function execLoop(x: ExecRun): Promise<void> {
  const { run } = x;
  const seen = new Set<string>();
  let obs: Observation | null = null;
  for (let n = 0; n < MAX_STARTS; n++) {
    const end = await step(x, n, obs);
    if (run.finished) return;
    switch (end.kind) {
      case "cancelled":
        return;
      case "invalid":
        return run.fail("EPROTO", `invalid agent output: ${end.reason}`);
      case "final": {
        if (end.error) {
          return run.fail(end.error.code, end.error.message);
        }
        if (end.code !== 0) {
          return run.fail(
            "EIO",
            `agent process failed (exit ${end.code})` + (end.stderr ? `: ${end.stderr}` : ""),
          );
        }
        const content = [{ type: "text" as const, text: end.text }];
        run.message({ role: "assistant", content });
        await run.emit({ type: "message", role: "assistant", content });
        return run.finish("ok", { latest: end.text });
      }
      case "yield": {
        if (end.code !== 0) {
          return run.fail("EIO", `agent exited ${end.code} after yielding`);
        }
        // Replays and the call budget are refused before any authorization happens.
        if (seen.has(end.call.id)) {
          return run.fail("EINVAL", `tool call id "${end.call.id}" was already used in this run`);
        }
        if (seen.size >= MAX_CALLS) {
          return run.fail("E2BIG", `more than ${MAX_CALLS} tool calls in one run`);
        }
        seen.add(end.call.id);
        obs = (await executeCall(x, end.call)).obs;
        if (run.finished) return;
      }
    }
  }
  await run.fail("E2BIG", `more than ${MAX_STARTS} process starts in one run`);
}
