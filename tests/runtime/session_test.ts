/** Rules 2 and 3: durable session files, index, scopes, and idempotent request ids (also across restarts). */
import { assert, assertEquals } from "../assert.ts";
import { cwdKey } from "../../src/store/session/index.ts";
import { readRecords } from "../../src/store/jsonl.ts";
import {
  addTestAgent,
  cleanup,
  ctx,
  history,
  makeTree,
  Raw,
  startRuntimeDaemon,
  type Tree,
} from "../fixture/mod.ts";
import { ignore } from "../../src/abi/errno.ts";

async function request(f: Tree, agent: string, frame: Record<string, unknown>) {
  const c = await Raw.connect(`${f.root}/agent/${agent}.sock`);
  try {
    c.write(frame);
    return await c.until((fs) =>
      fs.some((x) => x.type === "done" || (x.type === "error" && !x.run))
    );
  } finally {
    c.close();
  }
}

Deno.test("a send creates the session files, modes, index and records user message before the agent runs", async () => {
  const f = await makeTree();
  // The agent copies messages.jsonl as it starts (through /ctx, its read-only view of the tree):
  // the user message must already be there.
  addTestAgent(f, "t");
  const dir = `${f.root}/home/0/agent/t/session/work`;
  Deno.writeTextFileSync(
    `${f.root}/agent/t`,
    Deno.readTextFileSync(`${f.root}/agent/t`).replace(
      "IFS= read -r line",
      `cp /ctx/home/0/agent/t/session/work/messages.jsonl "$LOG_DIR/seen.jsonl"\nIFS= read -r line`,
    ),
  );
  const d = await startRuntimeDaemon(f);
  try {
    const frames = await request(f, "t", {
      op: "send",
      id: "m-1",
      session: "work",
      cwd: "/workspace/sub",
      input: "echo hi",
    });
    const run = String(frames[0].run);
    assertEquals(readRecords(`${f.logs}/seen.jsonl`), [{ role: "user", content: "echo hi", run }]);
    const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assertEquals(names, [
      "created_at",
      "events.jsonl",
      "latest.md",
      "messages.jsonl",
      "meta.json",
      "state",
      "updated_at",
    ]);
    assertEquals(Deno.statSync(dir).mode! & 0o777, 0o700);
    for (const n of names) assertEquals(Deno.statSync(`${dir}/${n}`).mode! & 0o777, 0o600, n);
    assertEquals(Deno.readTextFileSync(`${dir}/state`), "done\n");
    assertEquals(Deno.readTextFileSync(`${dir}/latest.md`), "echo: hi");
    assertEquals(JSON.parse(Deno.readTextFileSync(`${dir}/meta.json`)), {
      client: "ctx",
      scope: "private",
      model: "debug/echo",
    });
    assert(/^[0-9]+\n$/.test(Deno.readTextFileSync(`${dir}/created_at`)));
    const idx = `${f.root}/home/0/agent/t/session/index`;
    assertEquals(Deno.readTextFileSync(`${idx}/list`), "work\n");
    assertEquals(Deno.readTextFileSync(`${idx}/current`), "work\n");
    assertEquals(Deno.readTextFileSync(`${idx}/by-cwd/${cwdKey("/workspace/sub")}`), "work\n");
    assertEquals(history(f, "t", "work").messages, [
      { role: "user", content: "echo hi", run },
      { role: "assistant", content: [{ type: "text", text: "echo: hi" }], run },
    ]);
    // A second session goes to the top of the list and becomes current; ctx then picks it.
    await request(f, "t", { op: "send", id: "m-2", session: "other", input: "echo x" });
    assertEquals(Deno.readTextFileSync(`${idx}/list`), "other\nwork\n");
    const h = await ctx(f, ["agent", "history", "t", "--json"]);
    assertEquals(JSON.parse(h.stdout).length, 1);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("session null: the scope's index/current, else default; a planted bad name there is no session (default)", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  const base = `${f.root}/home/0/agent/coder/session`;
  const sessionOf = (frames: Record<string, unknown>[]) =>
    frames.find((x) => x.type === "start")?.session;
  try {
    // No index yet: default.
    const first = await request(f, "coder", { op: "send", id: "n-1", session: null, input: "a" });
    assertEquals(sessionOf(first), "default");
    await request(f, "coder", { op: "send", id: "n-2", session: "work", input: "b" });
    assertEquals(Deno.readTextFileSync(`${base}/index/current`), "work\n");
    const next = await request(f, "coder", { op: "send", id: "n-3", session: null, input: "c" });
    assertEquals(sessionOf(next), "work");
    assertEquals(readRecords(`${base}/work/messages.jsonl`).length, 4);
    // Absent still means default (raw clients keep their meaning).
    const plain = await request(f, "coder", { op: "send", id: "n-4", input: "d" });
    assertEquals(sessionOf(plain), "default");
    // index/current now says default; a name there that is no session name counts as none.
    Deno.writeTextFileSync(`${base}/index/current`, "../../etc\n");
    const bad = await request(f, "coder", { op: "send", id: "n-5", session: null, input: "e" });
    assertEquals(sessionOf(bad), "default");
    // The shared scope has an index of its own.
    await request(f, "coder", {
      op: "send",
      id: "n-6",
      session: "team",
      scope: "shared",
      input: "f",
    });
    const shared = await request(f, "coder", {
      op: "send",
      id: "n-7",
      session: null,
      scope: "shared",
      input: "g",
    });
    assertEquals(sessionOf(shared), "team");
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("scopes: shared lives under shared/, temp under the run dir and is never indexed", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    await request(f, "coder", {
      op: "send",
      id: "s-1",
      session: "team",
      scope: "shared",
      input: "shared words",
    });
    await request(f, "coder", {
      op: "send",
      id: "t-1",
      session: "scratch",
      scope: "temp",
      input: "temp words",
    });
    const shared = `${f.root}/shared/agents/agent/coder/session`;
    assertEquals(readRecords(`${shared}/team/messages.jsonl`).length, 2);
    assertEquals(Deno.readTextFileSync(`${shared}/index/list`), "team\n");
    assertEquals(readRecords(`${f.run}/temp/0/coder/session/scratch/messages.jsonl`).length, 2);
    const priv = `${f.root}/home/0/agent/coder/session`;
    assertEquals(
      [...Deno.readDirSync(priv)].some((e) => e.name === "scratch" || e.name === "team"),
      false,
    );
    assertEquals(
      readRecords(`${f.run}/temp/0/coder/session/scratch/events.jsonl`).at(-1)?.constructor,
      Object,
    );
    for (const idx of [`${priv}/index/list`, `${shared}/index/list`]) {
      let text = "";
      try {
        text = Deno.readTextFileSync(idx);
      } catch (e) {
        ignore(e, Deno.errors.NotFound); /* no index yet */
      }
      assert(!text.includes("scratch"), idx);
    }
    // resume finds private/shared sessions, never temp ones.
    const r = await new Promise<Record<string, unknown>[]>((resolve, reject) => {
      Raw.connect(`${f.root}/agent/coder.sock`).then(async (c) => {
        c.write({ op: "resume", session: "scratch" });
        const fs = await c.until((fs) => fs.length > 0);
        c.close();
        resolve(fs);
      }, reject);
    });
    assertEquals(r.map((x) => [x.type, x.code]), [["error", "ENOENT"]]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

Deno.test("resume replays the stored conversation and the session status", async () => {
  const f = await makeTree();
  const d = await startRuntimeDaemon(f);
  try {
    await request(f, "coder", { op: "send", id: "a", input: "first words" });
    const c = await Raw.connect(`${f.root}/agent/coder.sock`);
    c.write({ op: "resume", session: "default" });
    const fs = await c.until((fs) => fs.some((x) => x.type === "status"));
    c.close();
    assertEquals(fs.map((x) => [x.type, x.role ?? x.status, x.content ?? x.runs]), [
      ["history", "user", "first words"],
      ["history", "assistant", "first words"],
      ["status", "done", 1],
    ]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});

/** The wire copy of stored frames replayed to a repeated request id: each marked `replay`. */
function replayed(frames: Record<string, unknown>[]) {
  return frames.map((x) => ({ ...x, replay: true }));
}

Deno.test("a repeated request id replays the stored frames, runs nothing again, also after a restart", async () => {
  const f = await makeTree();
  addTestAgent(f, "t");
  let d = await startRuntimeDaemon(f);
  try {
    const frame = { op: "send", id: "same-1", session: "default", input: "echo once" };
    const first = await request(f, "t", frame);
    const runsBefore = [...Deno.readDirSync(f.logs)].length;
    const eventsBefore = history(f, "t").events.length;
    assertEquals(await request(f, "t", frame), replayed(first));
    // Same id, different payload: EINVAL, nothing recorded.
    const other = await request(f, "t", { ...frame, input: "echo twice" });
    assertEquals(other.map((x) => [x.type, x.code]), [["error", "EINVAL"]]);
    await d.stop();
    // The index is a view: delete it, restart, and the replay still holds.
    Deno.removeSync(`${f.run}/index/t.sqlite`); // t's instance's own index
    d = await startRuntimeDaemon(f);
    assertEquals(await request(f, "t", frame), replayed(first));
    assertEquals([...Deno.readDirSync(f.logs)].length, runsBefore);
    assertEquals(history(f, "t").events.length, eventsBefore);
    // The tsh op is idempotent the same way.
    const t1 = await request(f, "t", { op: "tsh", id: "tsh-1", args: ["tools"] });
    assertEquals(
      await request(f, "t", { op: "tsh", id: "tsh-1", args: ["tools"] }),
      replayed(t1),
    );
    assertEquals(t1.map((x) => x.type), ["start", "tool_call", "message", "done"]);
    // A refused or unknown tool: the error frame carries the tool's own errno, not a blanket EIO.
    const missing = await request(f, "t", { op: "tsh", id: "tsh-2", args: ["no-such-tool"] });
    assertEquals(missing.filter((x) => x.type === "error").map((x) => x.code), ["ENOENT"]);
  } finally {
    await d.stop();
    await cleanup(f);
  }
});
