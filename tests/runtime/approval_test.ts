/** Rules 5 and 6: approval=ask answered on the same connection (fail closed), and cancellation. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import {
  addTestAgent,
  cleanup,
  ctx,
  type Fixture,
  history,
  makeTree,
  Raw,
  startDaemon,
} from "./helpers.ts";

type F = Record<string, unknown>;

async function ask(f: Fixture, answer: (c: Raw, req: F) => void): Promise<F[]> {
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
  const d = await startDaemon(f, { approvalTimeoutMs: 400 });
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
  const d = await startDaemon(f);
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
  const d = await startDaemon(f);
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
    const leader = Number(Deno.readTextFileSync(`${f.logs}/${run}.leader`));
    const child = Number(Deno.readTextFileSync(`${f.logs}/${run}.child`));
    assert(alive(leader) && alive(child));
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
async function unanswered(f: Fixture, input: string): Promise<F[]> {
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
  const d = await startDaemon(f, { approvalTimeoutMs: 30_000 });
  try {
    // The executable is a symlink to a regular copy of itself: the nofollow check refuses it.
    const real = `${f.tmp}/fs.stat.real`;
    Deno.renameSync(`${f.root}/tool/fs.stat`, real);
    Deno.symlinkSync(real, `${f.root}/tool/fs.stat`);
    const linked = await unanswered(f, "call fs.stat /workspace");
    assertEquals(linked.map((x) => x.type), ["start", "tool_call", "message", "message", "done"]);
    const part = toolPart(linked);
    assertEquals([part.status, part.errno], ["error", "EACCES"]);
    assertMatch(String(part.content), /symlink/);
    Deno.removeSync(`${f.root}/tool/fs.stat`);
    Deno.renameSync(real, `${f.root}/tool/fs.stat`);

    // Authority passes but the view cannot be built (the start dir is missing in /workspace):
    // that check also comes before the approval, so nobody is asked about a call that cannot run.
    replaceFile(`${f.root}/agent/t.d/cwd`, "/workspace/absent\n");
    const view = await unanswered(f, "call fs.stat /workspace");
    assertEquals(view.map((x) => x.type), ["start", "tool_call", "message", "message", "done"]);
    assertEquals([toolPart(view).status, toolPart(view).errno], ["error", "ENOENT"]);

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
  const d = await startDaemon(f);
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
