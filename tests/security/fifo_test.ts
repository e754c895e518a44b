/** Issue 8, hole 4: a FIFO or symlink a user plants in a session tree never freezes the daemon nor is followed. */
import { assert, assertEquals } from "../assert.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import {
  addTestAgent,
  cleanup,
  makeTree,
  Raw,
  type RuntimeDaemon,
  startRuntimeDaemon,
  type Tree,
  until,
} from "../fixture/mod.ts";

/** Every wait on the daemon is bounded: a frozen daemon fails the test, it never stalls CI. */
const BOUND = 15_000;
/** The attacker: the uid owning the victim agent's sessions. */
const NOBODY = 65534;

type Frames = Record<string, unknown>[];

/** `p`, or a rejection naming `what` once {@link BOUND} has passed. */
async function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${BOUND} ms`)), BOUND);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

interface Booted extends RuntimeDaemon {
  /** SIGTERM; SIGKILL when a frozen daemon cannot act on it within the bound. */
  stop(): Promise<number>;
}

/** Starts cortexfsd (host and instances); one that is not serving within the bound fails. */
async function boot(f: Tree): Promise<Booted> {
  const d = await within(startRuntimeDaemon(f), "daemon start");
  const stop = async () => {
    try {
      return await within(d.stop(), "daemon stop");
    } catch {
      await d.kill9();
      return -1;
    }
  };
  return { ...d, stop };
}

/** One request on a fresh connection: its frames up to `done`, `status` or a request error. */
async function ask(f: Tree, agent: string, frame: Record<string, unknown>): Promise<Frames> {
  const c = await Raw.connect(`${f.root}/agent/${agent}.sock`);
  try {
    c.write(frame);
    return await c.until(
      (fs) =>
        fs.some((x) => x.type === "done" || x.type === "status" || (x.type === "error" && !x.run)),
      { boundMs: BOUND },
    );
  } finally {
    c.close();
  }
}

const send = (id: string, session: string, input: string) => ({ op: "send", id, session, input });

/** The reply of a send that must succeed: `[type, status]` of its last frame. */
function ended(fs: Frames): unknown[] {
  return [fs.at(-1)?.type, fs.at(-1)?.status];
}

/** The single request error of `fs`: its code and whether its message names `path`. */
function refusal(fs: Frames, path: string): unknown[] {
  const e = fs.find((x) => x.type === "error");
  return [e?.code, String(e?.message).includes(path)];
}

/** Runs `sh -c script` as the victim agent's uid: the attacker plants what it owns. */
async function asNobody(script: string): Promise<void> {
  const out = await new Deno.Command("setpriv", {
    args: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "sh", "-c", script],
    stderr: "piped",
  }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
}

/** A tree with `mine` (model-backed, sessions owned by nobody) and the executable `t` (root's). */
async function tree(): Promise<Tree> {
  const f = await makeTree();
  Deno.chmodSync(f.dir, 0o755); // nobody must reach its own home below
  createAgent(f.root, "mine", { uid: NOBODY, gid: NOBODY });
  addTestAgent(f, "t");
  return f;
}

/** Both neighbours answer a send: another agent (`t`, root's) and `mine`'s session `b` when given. */
async function neighbours(f: Tree, tag: string, options: { other?: boolean }) {
  const asks = [ask(f, "t", send(`t-${tag}`, "default", "echo alive"))];
  if (options.other) asks.push(ask(f, "mine", send(`b-${tag}`, "b", "still here")));
  return (await Promise.all(asks)).map(ended);
}

/**
 * The attack on one file of `mine`'s session `victim`: planted as a FIFO by its owner while the
 * daemon runs, then across a restart. `other`: whether `mine`'s session `b` is unaffected (not
 * when the FIFO is the index both share).
 */
async function fifoCase(target: string, options: { other: boolean }) {
  const f = await tree();
  const base = `${f.root}/home/${NOBODY}/agent/mine/session`;
  const victim = `${base}/victim`;
  const path = target.startsWith("index/") ? `${base}/${target}` : `${victim}/${target}`;
  let d = await boot(f);
  try {
    for (const s of ["b", "victim"]) {
      assertEquals(ended(await ask(f, "mine", send(`${s}-0`, s, "hello"))), ["done", "ok"]);
    }
    await asNobody(`rm -f '${path}' && mkfifo -m 600 '${path}'`);
    assert(Deno.lstatSync(path).isFifo);
    // While attacked: the victim answers EIO naming the FIFO, and its neighbours answer, all at once.
    const [resumed, sent, near] = await Promise.all([
      ask(f, "mine", { op: "resume", session: "victim" }),
      ask(f, "mine", send("victim-1", "victim", "again")),
      neighbours(f, "1", options),
    ]);
    assertEquals(
      { resume: refusal(resumed, path), send: refusal(sent, path), near },
      {
        resume: ["EIO", true],
        send: ["EIO", true],
        near: options.other ? [["done", "ok"], ["done", "ok"]] : [["done", "ok"]],
      },
    );
    assert(Deno.lstatSync(path).isFifo, "the FIFO is refused, never replaced or repaired");
    // The instance's stderr reaches the agent's log through its host.
    const said = `EIO: ${path} is a FIFO`;
    await until(() => d.agentLog("mine").includes(said), said, BOUND);
    await d.stop();
    // A restart with the FIFO in place: it starts, reports the session broken, and serves the rest.
    d = await boot(f);
    const mine = (await d.started("mine")).broken.filter((b) => b.dir === victim);
    assertEquals(mine.map((b) => [b.errno, b.message.includes(path)]), [["EIO", true]]);
    assert(d.agentLog("mine").includes(`skipping ${victim}`), d.agentLog("mine"));
    assertEquals(d.agents().includes("mine") && d.agents().includes("t"), true);
    const [again, resent, after] = await Promise.all([
      ask(f, "mine", { op: "resume", session: "victim" }),
      ask(f, "mine", send("victim-2", "victim", "once more")),
      neighbours(f, "2", options),
    ]);
    assertEquals(
      { resume: refusal(again, path), send: refusal(resent, path), after },
      {
        resume: ["EIO", true],
        send: ["EIO", true],
        after: options.other ? [["done", "ok"], ["done", "ok"]] : [["done", "ok"]],
      },
    );
  } finally {
    await d.stop();
    await cleanup(f);
  }
}

Deno.test("a FIFO planted as messages.jsonl: resume and send answer EIO naming it, a restart reports the session broken, everyone else is served", async () => {
  await fifoCase("messages.jsonl", { other: true });
});

Deno.test("a FIFO planted as events.jsonl: resume and send answer EIO naming it, a restart reports the session broken, everyone else is served", async () => {
  await fifoCase("events.jsonl", { other: true });
});

Deno.test("a FIFO planted as index/list: resume and send answer EIO naming it, a restart reports the session broken, other agents are served", async () => {
  await fifoCase("index/list", { other: false });
});

Deno.test("a symlink planted as events.jsonl to a root-only file is refused with EIO, never followed (read or written)", async () => {
  const f = await tree();
  // `t` runs as root: following the link would read and append to root's file with root's rights.
  const secret = `${f.dir}/secret.jsonl`;
  const text = '{"type":"start","run":"ctx-secret","client_id":"secret-1"}\n';
  Deno.writeTextFileSync(secret, text, { mode: 0o600 });
  const dir = `${f.root}/home/0/agent/t/session/victim`;
  const path = `${dir}/events.jsonl`;
  let d = await boot(f);
  try {
    assertEquals(ended(await ask(f, "t", send("v-0", "victim", "echo one"))), ["done", "ok"]);
    Deno.removeSync(path);
    Deno.symlinkSync(secret, path);
    const [resumed, sent, near] = await Promise.all([
      ask(f, "t", { op: "resume", session: "victim" }),
      ask(f, "t", send("v-1", "victim", "echo two")),
      ask(f, "coder", send("c-1", "default", "alive")),
    ]);
    assertEquals(
      { resume: refusal(resumed, path), send: refusal(sent, path), near: ended(near) },
      { resume: ["EIO", true], send: ["EIO", true], near: ["done", "ok"] },
    );
    await d.stop();
    d = await boot(f);
    const broken = (await d.started("t")).broken.filter((b) => b.dir === dir);
    assertEquals(broken.map((b) => [b.errno, b.message.includes(path)]), [["EIO", true]]);
    // The replay of a request id the secret names finds nothing: the link is never read.
    const replay = await ask(f, "t", send("secret-1", "victim", "echo three"));
    assertEquals(refusal(replay, dir), ["EIO", true]);
    assertEquals(ended(await ask(f, "coder", send("c-2", "default", "alive"))), ["done", "ok"]);
    assertEquals(
      Deno.readTextFileSync(secret),
      text,
      "root's file is neither read nor appended to",
    );
    assert(Deno.lstatSync(path).isSymlink);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
