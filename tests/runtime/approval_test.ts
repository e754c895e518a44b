/** Rules 5 and 6: approval=ask answered on the same connection (fail closed), and cancellation. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { AgentClient } from "../../src/ctx/client.ts";
import { follow, sendRequest } from "../../src/ctx/stream.ts";
import {
  addTestAgent,
  cleanup,
  ctx,
  history,
  makeTree,
  Raw,
  runPids,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";

type F = Record<string, unknown>;

async function ask(f: Tree, answer: (c: Raw, req: F) => void): Promise<F[]> {
  const c = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    c.write({ op: "send", id: crypto.randomUUID(), input: "call fs.stat /workspace" });
    const [req] = (await c.until((fs) => fs.some((x) => x.type === "approval_request")))
      .filter((x) => x.type === "approval_request");
    answer(c, req);
    return await c.run();
  } finally {
    c.close();
  }
}

function verdict(frames: F[]) {
  const res = frames.find((x) => x.type === "approval_result")!;
  const tool = frames.find((x) => x.type === "message" && x.role === "tool")!;
  const part = (tool.content as F[])[0];
  return {
    decision: res.decision,
    reason: res.reason,
    errno: part.errno ?? null,
    done: frames.at(-1)?.status,
  };
}

Deno.test("approval=ask: only a matching allow_once runs the call; every other answer fails closed", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f, { approvalTimeoutMs: 400 });
  try {
    const allowed = await ask(
      f,
      (c, r) => c.write({ op: "approve", run: r.run, id: r.id, decision: "allow_once" }),
    );
    const req = allowed.find((x) => x.type === "approval_request")!;
    assertEquals({ ...req, run: "-" }, {
      type: "approval_request",
      run: "-",
      id: "call-1",
      name: "fs.stat",
      args: ["fs.stat", "/workspace"],
    });
    // Order: the host's tool_call, then the request, then the answer, then the result.
    assertEquals(allowed.map((x) => x.type), [
      "start",
      "tool_call",
      "approval_request",
      "approval_result",
      "message",
      "message",
      "done",
    ]);
    assertEquals(verdict(allowed), {
      decision: "allow_once",
      reason: "allow_once",
      errno: null,
      done: "ok",
    });

    const cases: [string, (c: Raw, r: F) => void][] = [
      ["denied", (c, r) => c.write({ op: "approve", run: r.run, id: r.id, decision: "deny" })],
      [
        "mismatched",
        (c, r) => c.write({ op: "approve", run: r.run, id: "call-9", decision: "allow_once" }),
      ],
      [
        "malformed",
        (c, r) =>
          c.write({ op: "approve", run: r.run, id: r.id, decision: "allow_once", extra: 1 }),
      ],
      ["malformed", (c) => c.write("{not json\n")],
      ["eof", (c) => c.socket.end()],
      ["timeout", () => {}],
    ];
    for (const [reason, answer] of cases) {
      const frames = await ask(f, answer);
      assertEquals(
        verdict(frames),
        { decision: "deny", reason, errno: "EACCES", done: "ok" },
        reason,
      );
    }
    // Approval facts are host records in events.jsonl.
    const ev = history(f, "t").events.filter((x) => x.type === "approval_result").map((x) =>
      x.reason
    );
    assertEquals(ev, [
      "allow_once",
      "denied",
      "mismatched",
      "malformed",
      "malformed",
      "eof",
      "timeout",
    ]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("ctx agent send --approve TOOL answers allow_once for that tool only", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  try {
    const yes = await ctx(f, [
      "agent",
      "send",
      "t",
      "--approve",
      "fs.stat",
      "--json",
      "call fs.stat /workspace",
    ]);
    const no = await ctx(f, [
      "agent",
      "send",
      "t",
      "--approve",
      "fs.read",
      "--json",
      "call fs.stat /workspace",
    ]);
    const reasons = (out: string) =>
      out.trim().split("\n").map((l) => JSON.parse(l)).filter((x) => x.type === "approval_result")
        .map((x) => x.decision);
    assertEquals(reasons(yes.stdout), ["allow_once"]);
    assertEquals(reasons(no.stdout), ["deny"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}

Deno.test("cancel records the cancellation, kills the agent's process group, records nothing later", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  const d = await startRuntimeDaemon(f);
  try {
    const c = await Raw.connect(`${f.root}/agent/t.sock`);
    c.write({ op: "send", id: "long-1", input: "sleep" });
    const fs = await c.until((fs) => fs.some((x) => x.type === "delta"));
    const run = String(fs[0].run);
    // Wait until the agent wrote its pids (it does so right after its first delta).
    for (
      let i = 0;
      i < 200 && !(() => {
        try {
          return Deno.readTextFileSync(`${f.logs}/${run}.leader`).trim() !== "";
        } catch {
          return false;
        }
      })();
      i++
    ) {
      await new Promise((r) => setTimeout(r, 10));
    }
    // The agent and its background child, as the host sees them (inside they have ns pids).
    const [leader, child] = runPids(run);
    assert(child !== undefined && alive(leader) && alive(child));
    const out = await ctx(f, ["agent", "cancel", "t", run]);
    assertEquals(out, { code: 0, stdout: `${run}\tcancelled\n`, stderr: "" });
    const frames = await c.run();
    c.close();
    assertEquals(frames.map((x) => x.type), ["start", "delta", "done"]);
    assertEquals(frames.at(-1)?.status, "cancelled");
    for (let i = 0; i < 100 && (alive(leader) || alive(child)); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assertEquals([alive(leader), alive(child)], [false, false]);
    const ev = history(f, "t").events.filter((x) => x.run === run).map((x) => x.type);
    assertEquals(ev, ["start", "delta", "cancel", "done"]);
    assertEquals(Deno.readTextFileSync(`${history(f, "t").dir}/state`), "cancelled\n");
    // A second cancel reports the final status; an unknown run is ENOENT.
    assertEquals((await ctx(f, ["agent", "cancel", "t", run])).stdout, `${run}\tcancelled\n`);
    assertEquals((await ctx(f, ["agent", "cancel", "t", "ctx-nope"])).code, 1);
    // ctx send's exit status reflects the outcome: 130 for a cancelled run, 0 for ok.
    assertEquals((await ctx(f, ["agent", "send", "t", "echo fine"])).code, 0);
    assertEquals((await ctx(f, ["agent", "send", "t", "error"])).code, 1);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

/** One run of `input` from a raw client that never answers an approval_request. */
async function unanswered(f: Tree, input: string): Promise<F[]> {
  const c = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    c.write({ op: "send", id: crypto.randomUUID(), input });
    return await c.run();
  } finally {
    c.close();
  }
}

function toolPart(frames: F[]): F {
  const tool = frames.find((x) => x.type === "message" && x.role === "tool")!;
  return (tool.content as F[])[0];
}

Deno.test("approval=ask: a call refused by any check (symlinked executable, unusable view) never reaches an approval_request", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  // A long approval timeout: a wrongly emitted request would stall the run, not pass quietly.
  const d = await startRuntimeDaemon(f, { approvalTimeoutMs: 30_000 });
  try {
    // The executable is a symlink to a regular copy of itself: the nofollow check refuses it.
    const real = `${f.dir}/fs.stat.real`;
    Deno.renameSync(`${f.root}/tool/fs.stat`, real);
    Deno.symlinkSync(real, `${f.root}/tool/fs.stat`);
    const linked = await unanswered(f, "call fs.stat /workspace");
    assertEquals(linked.map((x) => x.type), ["start", "tool_call", "message", "message", "done"]);
    const part = toolPart(linked);
    assertEquals([part.status, part.errno], ["error", "EACCES"]);
    assertMatch(String(part.content), /symlink/);
    Deno.removeSync(`${f.root}/tool/fs.stat`);
    Deno.renameSync(real, `${f.root}/tool/fs.stat`);

    // The view cannot be built (the start dir is missing in /workspace): the agent runs in the
    // same view as its tools, so the run fails before the agent starts, and nobody is asked.
    replaceFile(`${f.root}/agent/t.d/cwd`, "/workspace/absent\n");
    const view = await unanswered(f, "call fs.stat /workspace");
    assertEquals(view.map((x) => x.type), ["start", "error", "done"]);
    assertEquals(view[1].code, "ENOENT");

    const ev = history(f, "t").events;
    assertEquals(ev.filter((x) => String(x.type).startsWith("approval")), []);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("approval=ask: a valid call emits exactly one approval_request and runs only on allow_once", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f);
  const ws = await Deno.makeTempDir({ prefix: "ctx-ws-" });
  try {
    const send = (approve: string[]) =>
      ctx(f, ["agent", "send", "t", ...approve, "--json", "call fs.write /workspace/marker yes"], {
        cwd: ws,
      });
    const seen = (out: string) => {
      const fs = out.trim().split("\n").map((l) => JSON.parse(l)) as F[];
      return {
        requests: fs.filter((x) => x.type === "approval_request").map((x) => x.name),
        decisions: fs.filter((x) => x.type === "approval_result").map((x) => x.decision),
        errno: toolPart(fs).errno ?? null,
        marker: (() => {
          try {
            return Deno.readTextFileSync(`${ws}/marker`);
          } catch {
            return null;
          }
        })(),
      };
    };
    // ctx answers deny for every tool it was not told to approve: nothing is written.
    assertEquals(seen((await send([])).stdout), {
      requests: ["fs.write"],
      decisions: ["deny"],
      errno: "EACCES",
      marker: null,
    });
    assertEquals(seen((await send(["--approve", "fs.read"])).stdout).marker, null);
    // allow_once for fs.write: the same call now runs, in the client's workspace.
    assertEquals(seen((await send(["--approve", "fs.write"])).stdout), {
      requests: ["fs.write"],
      decisions: ["allow_once"],
      errno: null,
      marker: "yes",
    });
  } finally {
    await d.stop();
    await cleanup(f);
    await Deno.remove(ws, { recursive: true }).catch(() => {});
  }
});

Deno.test("approval=ask: a cancel of the waiting run is recorded as approval_result cancelled before the run ends", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f, { approvalTimeoutMs: 30_000 });
  try {
    const c = await Raw.connect(`${f.root}/agent/t.sock`);
    try {
      c.write({ op: "send", id: "own-1", input: "call fs.stat /workspace" });
      const fs = await c.until((fs) => fs.some((x) => x.type === "approval_request"));
      const run = String(fs[0].run);
      c.write({ op: "cancel", id: run });
      const all = await c.until((fs) => fs.some((x) => x.type === "ack"));
      assertEquals(all.map((x) => x.type), [
        "start",
        "tool_call",
        "approval_request",
        "approval_result",
        "done",
        "ack",
      ]);
      const res = all.find((x) => x.type === "approval_result")!;
      assertEquals([res.decision, res.reason], ["deny", "cancelled"]);
      assertEquals(all.at(-2)?.status, "cancelled");
      assertEquals(all.at(-1), { type: "ack", op: "cancel", run, status: "cancelled" });
      const ev = history(f, "t").events.filter((x) => x.run === run).map((x) =>
        x.type === "approval_result" ? `${x.type}:${x.reason}` : x.type
      );
      assertEquals(ev, [
        "start",
        "tool_call",
        "approval_request",
        "approval_result:cancelled",
        "cancel",
        "done",
      ]);
    } finally {
      c.close();
    }
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("approval=ask: a cancel for another run while an approval waits is carried out (authorized) and the approval keeps waiting", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f, { approvalTimeoutMs: 30_000 });
  const other = await Raw.connect(`${f.root}/agent/t.sock`);
  const c = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    // A long run in another session (runs of one session are serialized).
    other.write({ op: "send", id: "long-2", session: "s2", input: "sleep" });
    const long = String((await other.until((fs) => fs.some((x) => x.type === "delta")))[0].run);
    c.write({ op: "send", id: "ask-2", input: "call fs.stat /workspace" });
    const req = (await c.until((fs) => fs.some((x) => x.type === "approval_request")))
      .find((x) => x.type === "approval_request")!;
    // An unknown run: refused as the cancel op refuses it (ENOENT with the id), nothing else.
    c.write({ op: "cancel", id: "ctx-nope" });
    await c.until((fs) => fs.some((x) => x.type === "error"));
    c.write({ op: "cancel", id: long });
    await c.until((fs) => fs.some((x) => x.type === "ack"));
    // The approval is still pending: a matching allow_once still admits the call.
    c.write({ op: "approve", run: req.run, id: req.id, decision: "allow_once" });
    const frames = await c.until((fs) => fs.some((x) => x.type === "done"));
    assertEquals(
      frames.filter((x) =>
        !x.run || x.type === "ack" || x.type === "approval_result" || x.type === "done"
      )
        .map((x) => [x.type, x.code ?? x.id ?? null, x.status ?? x.reason ?? null]),
      [
        ["error", "ENOENT", null],
        ["ack", null, "cancelled"],
        ["approval_result", "call-1", "allow_once"],
        ["done", null, "ok"],
      ],
    );
    assertEquals(frames.find((x) => x.type === "error")?.id, "ctx-nope");
    assertEquals(frames.find((x) => x.type === "ack")?.run, long);
    assertEquals(toolPart(frames).errno, undefined);
    const ended = await other.run();
    assertEquals(ended.at(-1)?.status, "cancelled");
    const ev = history(f, "t", "s2").events.filter((x) => x.run === long).map((x) => x.type);
    assertEquals(ev, ["start", "delta", "cancel", "done"]);
  } finally {
    c.close();
    other.close();
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("follow: replayed approval_requests are not answered; only an error with the request id ends it", async () => {
  const f = await makeTree();
  addTestAgent(f, "t", { approval: "ask" });
  const d = await startRuntimeDaemon(f, { approvalTimeoutMs: 30_000 });
  const c = await Raw.connect(`${f.root}/agent/t.sock`);
  try {
    const input = "call fs.stat /workspace";
    c.write({ op: "send", id: "live-1", input });
    const req = (await c.until((fs) => fs.some((x) => x.type === "approval_request")))
      .find((x) => x.type === "approval_request")!;
    c.write({ op: "approve", run: req.run, id: req.id, decision: "allow_once" });
    await c.run();

    // A replay of that run (same id): every frame marked, and the client answers nothing, so
    // nothing but the replay comes back (an answer would draw an EINVAL error frame).
    const a = await AgentClient.connect(f.root, "t");
    try {
      const seen: F[] = [];
      sendRequest(a, { op: "send", id: "live-1", session: "default", input });
      const out = await follow(a, {
        id: "live-1",
        approve: ["fs.stat"],
        onFrame: (x) => seen.push(x),
      });
      assertEquals([out.status, out.run], ["ok", req.run]);
      assert(seen.length === 7 && seen.every((x) => x.replay === true), JSON.stringify(seen));
      a.end();
      assertEquals(await a.next(), undefined);
    } finally {
      a.close();
    }

    // Errors for other requests (an approve with nothing pending: no id; a cancel of an unknown
    // run: that run's id) do not end the follow of this request.
    const b = await AgentClient.connect(f.root, "t");
    try {
      b.send({ op: "approve", run: "ctx-x", id: "call-1", decision: "deny" });
      b.send({ op: "cancel", id: "ctx-nope" });
      sendRequest(b, { op: "send", id: "next-1", session: "default", input: "echo hi" });
      const out = await follow(b, { id: "next-1" });
      assertEquals([out.status, out.text.trim()], ["ok", "hi"]);
    } finally {
      b.close();
    }
    // A request's own error does end it, with its errno.
    const e = await AgentClient.connect(f.root, "t");
    try {
      sendRequest(e, { op: "send", id: "live-1", session: "default", input: "other payload" });
      const out = await follow(e, { id: "live-1" });
      assertEquals([out.status, out.errno], ["error", "EINVAL"]);
    } finally {
      e.close();
    }
  } finally {
    c.close();
    await d.stop();
    await cleanup(f);
  }
});
