/** Shared fixtures of the runtime tests: a real tree, a real daemon process, real clients. */
import net from "node:net";
import { serverFrameStrict } from "../../src/abi/frames.ts";
import { currentGeneration, update } from "../../src/store/generation.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { readRecords } from "../../src/store/jsonl.ts";

const HERE = new URL(".", import.meta.url).pathname;
/** The checkout root. */
export const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
/** The pinned Deno launcher. */
export const DENO = `${REPO}/tools/deno`;
/** Secrets placed in the daemon's environment: none may reach an agent. */
export const DAEMON_SECRETS = {
  OPENAI_API_KEY: "sk-test-openai-secret",
  AWS_SECRET_ACCESS_KEY: "aws-test-secret",
  CORTEXFS_MADEUP_TOKEN: "made-up-token-value",
};

/** A temp storage root with generation 1, a run dir, and a log dir for the test agent. */
export interface Fixture {
  tmp: string;
  root: string;
  run: string;
  logs: string;
}

/** Builds a fresh tree with the real initial-tree migration. */
export async function makeTree(): Promise<Fixture> {
  const tmp = await Deno.makeTempDir({ prefix: "ctx-rt-" });
  const storage = `${tmp}/storage`;
  update(storage, { uid: 0, gid: 0 });
  const root = currentGeneration(storage);
  await Deno.mkdir(`${tmp}/logs`);
  return { tmp, root, run: `${tmp}/run`, logs: `${tmp}/logs` };
}

/** Installs the bash test agent as `agent/<name>` (through createAgent) with LOG_DIR in its env. */
export function addTestAgent(
  f: Fixture,
  name: string,
  options: { approval?: "ask"; env?: Record<string, string> } = {},
): void {
  createAgent(f.root, name, { uid: 0, gid: 0, exec: `${HERE}agent.sh` });
  const env = { LOG_DIR: f.logs, AGENT_FLAVOR: "test", ...options.env };
  replaceFile(
    `${f.root}/agent/${name}.d/env`,
    Object.entries(env).map(([k, v]) => `${k}=${v}\n`).join(""),
  );
  if (options.approval) replaceFile(`${f.root}/agent/${name}.d/approval`, `${options.approval}\n`);
  // The agent runs sandboxed: its log dir is bound into its view at the same path, by policy.
  grantLogs(f, name);
}

/** Binds the fixture's log dir read-write into agent `name`'s sandbox (mount line + policy grants). */
export function grantLogs(f: Fixture, name: string): void {
  const d = `${f.root}/agent/${name}.d`;
  replaceFile(`${d}/mount`, `${f.logs}\t${f.logs}\trw\t-\n`);
  const subject = Deno.readTextFileSync(`${d}/label`).trim().split(":")[2];
  const policy = Deno.readTextFileSync(`${d}/policy`);
  replaceFile(
    `${d}/policy`,
    policy + `allow ${subject} mount:${f.logs} read\nallow ${subject} mount:${f.logs} write\n`,
  );
}

/** A daemon child process running tests/runtime/daemon.ts. */
export interface Daemon {
  child: Deno.ChildProcess;
  ready: {
    agents: string[];
    recovered: string[];
    broken: { dir: string; errno: string; message: string }[];
    failed: { dir: string; errno: string; message: string }[];
    reaped: { stopped: number[]; stale: string[] };
  };
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait (a crash). */
  kill9(): Promise<void>;
}

/** Starts the daemon with secrets in its environment and waits for its ready line. */
export async function startDaemon(
  f: Fixture,
  options: {
    approvalTimeoutMs?: number;
    env?: Record<string, string>;
    /** A command prefix the daemon runs under (e.g. setpriv giving it supplementary groups). */
    wrap?: string[];
  } = {},
): Promise<Daemon> {
  const args = ["run", "-A", `${HERE}daemon.ts`, "--root", f.root, "--run", f.run];
  if (options.approvalTimeoutMs) args.push("--approval-timeout", String(options.approvalTimeoutMs));
  const [cmd, ...pre] = [...(options.wrap ?? []), DENO];
  const child = new Deno.Command(cmd, {
    args: [...pre, ...args],
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      NO_COLOR: "1",
      ...DAEMON_SECRETS,
      ...options.env,
    },
    stdout: "piped",
    stderr: "inherit",
    stdin: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  while (!buf.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`daemon exited before ready: ${buf}`);
    buf += value;
  }
  // Keep draining stdout so the daemon never blocks on it.
  (async () => {
    while (!(await reader.read()).done) { /* discard */ }
  })().catch(() => {});
  const ready = JSON.parse(buf.slice(0, buf.indexOf("\n")));
  let gone = false;
  const end = async (sig: Deno.Signal) => {
    if (gone) return;
    gone = true;
    try {
      child.kill(sig);
    } catch { /* already exited */ }
    await child.status;
  };
  return { child, ready, stop: () => end("SIGTERM"), kill9: () => end("SIGKILL") };
}

/** A dir holding a `ctx` (the test entry bound to the fixture's tree) to put on PATH. */
export function ctxBin(f: Fixture): string {
  const dir = `${f.tmp}/bin`;
  Deno.mkdirSync(dir, { recursive: true });
  Deno.writeTextFileSync(
    `${dir}/ctx`,
    `#!/bin/sh\nexec ${DENO} run -A ${HERE}ctx.ts --root ${f.root} "$@"\n`,
  );
  Deno.chmodSync(`${dir}/ctx`, 0o755);
  return dir;
}

/** Result of a CLI run. */
export interface Output {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the test `ctx` entry (`ctx agent ...` with the runtime commands) as a child process. */
export async function ctx(
  f: Fixture,
  args: string[],
  options: { stdin?: string; cwd?: string } = {},
): Promise<Output> {
  const child = new Deno.Command(DENO, {
    args: ["run", "-A", `--config=${REPO}/deno.json`, `${HERE}ctx.ts`, "--root", f.root, ...args],
    // The client's cwd is the workspace the daemon binds (read from /proc, never from a frame).
    cwd: options.cwd,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      NO_COLOR: "1",
    },
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** A raw JSONL client on an agent socket, from the test process itself. */
export class Raw {
  socket: net.Socket;
  frames: Record<string, unknown>[] = [];
  /** Frames no schema of src/abi/frames.ts accepts: `until` fails on the first. */
  invalid: string[] = [];
  ended = false;
  #buf = "";
  #wake?: () => void;

  private constructor(s: net.Socket) {
    this.socket = s;
    s.setEncoding("utf8");
    s.on("data", (d: string) => {
      this.#buf += d;
      let i;
      while ((i = this.#buf.indexOf("\n")) >= 0) {
        const f = JSON.parse(this.#buf.slice(0, i));
        // Every frame the server writes must be one the ABI's own schemas accept (strict).
        const v = serverFrameStrict.safeParse(f);
        if (!v.success) this.invalid.push(`${JSON.stringify(f)}: ${v.error.issues[0]?.message}`);
        this.frames.push(f);
        this.#buf = this.#buf.slice(i + 1);
      }
      this.#wake?.();
    });
    const end = () => {
      this.ended = true;
      this.#wake?.();
    };
    s.on("close", end);
    s.on("end", end);
    s.on("error", end);
  }

  /** Connects to `<root>/agent/<name>.sock`. */
  static connect(path: string): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path);
      s.once("connect", () => resolve(new Raw(s)));
      s.once("error", reject);
    });
  }

  /** Writes a frame (object) or raw bytes/text. */
  write(frame: unknown): void {
    if (typeof frame === "string" || frame instanceof Uint8Array) this.socket.write(frame);
    else this.socket.write(JSON.stringify(frame) + "\n");
  }

  /**
   * Waits until `pred` holds over the frames received so far. Fails (never hangs) when the stream
   * ends first or nothing satisfies it within a generous bound: a regression must fail the suite,
   * not stall CI.
   */
  async until(
    pred: (frames: Record<string, unknown>[]) => boolean,
    options: { boundMs?: number } = {},
  ): Promise<Record<string, unknown>[]> {
    const give = Date.now() + (options.boundMs ?? 60_000);
    for (;;) {
      if (this.invalid.length) throw new Error(`frame outside the ABI: ${this.invalid[0]}`);
      if (pred(this.frames)) break;
      if (this.ended) throw new Error(`connection ended; frames: ${JSON.stringify(this.frames)}`);
      const left = give - Date.now();
      if (left <= 0) throw new Error(`no such frame yet; frames: ${JSON.stringify(this.frames)}`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((r) => {
        this.#wake = r;
        timer = setTimeout(r, left);
      });
      clearTimeout(timer);
    }
    return this.frames;
  }

  /** Waits for the `done` of the first run started on this connection after `from`. */
  async run(from = 0): Promise<Record<string, unknown>[]> {
    const fs = await this.until((fs) => fs.slice(from).some((f) => f.type === "done"));
    const rest = fs.slice(from);
    return rest.slice(0, rest.findIndex((f) => f.type === "done") + 1);
  }

  /** Closes the connection. */
  close(): void {
    this.socket.destroy();
  }
}

/** events.jsonl and messages.jsonl of a private session (they must parse). */
export function history(f: Fixture, agent: string, session = "default", uid = 0) {
  const dir = `${f.root}/home/${uid}/agent/${agent}/session/${session}`;
  return {
    dir,
    events: readRecords(`${dir}/events.jsonl`) as Record<string, unknown>[],
    messages: readRecords(`${dir}/messages.jsonl`) as Record<string, unknown>[],
  };
}

/** Removes everything the fixture made. */
export async function cleanup(f: Fixture): Promise<void> {
  await Deno.remove(f.tmp, { recursive: true }).catch(() => {});
}

/** Strips the volatile fields (ids, times, digests) of frames for whole-value comparison. */
export function shape(frames: Record<string, unknown>[]): Record<string, unknown>[] {
  return frames.map((f) => {
    const o: Record<string, unknown> = { ...f };
    for (const k of ["run", "id", "ts", "digest", "client_id"]) if (k in o) o[k] = `<${k}>`;
    return o;
  });
}

/**
 * Host pids of every live process of a run: the ones whose environment carries its CTX_RUN_ID
 * (the agent and whatever it started; inside the sandbox's pid namespace they see other pids).
 */
export function runPids(run: string): number[] {
  const needle = new TextEncoder().encode(`CTX_RUN_ID=${run}\0`);
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      const env = Deno.readFileSync(`/proc/${e.name}/environ`);
      if (indexOf(env, needle) >= 0) out.push(Number(e.name));
    } catch { /* gone meanwhile */ }
  }
  return out.sort((a, b) => a - b);
}

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * Waits for a condition the test cannot be told about (a file's contents, a process's exit):
 * checks `pred` every 10 ms and fails, naming `what`, after `ms` (default 10 s). A bound, never a
 * sleep standing in for an event.
 */
export async function until(
  pred: () => boolean | Promise<boolean>,
  what = "the condition",
  ms = 10_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
