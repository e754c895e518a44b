/** Issue 24 items 2 and 13: `control.sock` cannot starve the daemon (a per-uid cap, a global cap well below the fd limit, an accept loop that outlives EMFILE) and a uid's terminals are bounded. */
import net from "node:net";
import { assert, assertEquals, assertStringIncludes } from "../assert.ts";
import { MAX_CONNS_PER_UID } from "../../src/runtime/server.ts";
import { MAX_TERMINALS_PER_UID } from "../../src/host/terminals.ts";
import { createAgent } from "../../src/store/agent_new.ts";
import { BOUND_MS, type Target, withTarget } from "../fixture/mod.ts";

/** A connection to control.sock that sends `frame` (`{"op":"ps"}`) and collects answer lines. */
interface Held {
  socket: net.Socket;
  lines: Record<string, unknown>[];
  /** Settles with the first answer line (rejects when the connection ends first or after the bound). */
  first: Promise<Record<string, unknown>>;
}

function ask(path: string, frame: unknown = { op: "ps" }): Promise<Held> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path, allowHalfOpen: true });
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.off("error", reject);
      socket.on("error", () => {/* reset by the server: "close" follows */});
      const h: Held = { socket, lines: [], first: Promise.resolve({}) };
      h.first = new Promise((ok, fail) => {
        const t = setTimeout(() => fail(new Error("no answer within the bound")), BOUND_MS);
        let buf = "";
        socket.setEncoding("utf8");
        socket.on("data", (d: string) => {
          buf += d;
          let i;
          while ((i = buf.indexOf("\n")) >= 0) {
            h.lines.push(JSON.parse(buf.slice(0, i)));
            buf = buf.slice(i + 1);
          }
          if (h.lines.length) {
            clearTimeout(t);
            ok(h.lines[0]);
          }
        });
        socket.once("close", () => {
          clearTimeout(t);
          fail(new Error("closed without an answer"));
        });
      });
      h.first.catch(() => {/* awaited by the test, or not wanted */});
      socket.write(JSON.stringify(frame) + "\n");
      resolve(h);
    });
  });
}

/** The daemon's pid (the fixture's child). */
const pidOf = (t: Target) => t.daemon.child.pid;

/** fds the process has open, and its RLIMIT_NOFILE soft limit. */
function fds(pid: number): { open: number; limit: number } {
  const open = [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
  const line = Deno.readTextFileSync(`/proc/${pid}/limits`).split("\n").find((l) =>
    l.startsWith("Max open files")
  );
  return { open, limit: Number(line?.split(/\s+/)[3]) };
}

/** Another user's control op: uid 1000's `ctx agent status coder` answers. */
async function otherStatus(t: Target): Promise<void> {
  const r = await t.ctx(["agent", "status", "coder"], { uid: 1000 });
  assertEquals(r.code, 0, `ctx agent status as 1000: ${r.stdout} ${r.stderr}`);
}

Deno.test("control.sock: one uid's connections past MAX_CONNS_PER_UID are refused EBUSY and hold no fd; other users' control ops and the mount answer during and after", async () => {
  await withTarget(async (t) => {
    const path = `${t.tree.run}/control.sock`;
    const pid = pidOf(t);
    const before = fds(pid);
    const held: Held[] = [];
    try {
      for (let i = 0; i < MAX_CONNS_PER_UID; i++) {
        const h = await ask(path);
        assertEquals((await h.first).type, "ps");
        held.push(h);
      }
      const during = fds(pid);
      const extra: Held[] = [];
      for (let i = 0; i < 8; i++) extra.push(await ask(path));
      // Refused: one EBUSY frame (or, had the request come after the close, none), never served.
      const codes = await Promise.all(
        extra.map((h) => h.first.then((f) => f.code ?? f.type, () => "EBUSY")),
      );
      assertEquals(codes, Array(8).fill("EBUSY"));
      for (const h of extra) h.socket.destroy();
      console.log(
        `daemon fds: ${before.open} at rest, ${during.open} with ${MAX_CONNS_PER_UID} held, limit ${before.limit}`,
      );
      // The flood costs one fd a connection (no cwd opened for ps) and leaves the rest.
      assert(during.open - before.open <= MAX_CONNS_PER_UID + 4, `${during.open} fds`);
      await otherStatus(t);
      await t.bystander();
    } finally {
      for (const h of held) h.socket.destroy();
    }
    await otherStatus(t);
    await t.bystander();
  }, { setup: (tree) => Deno.chmodSync(tree.dir, 0o755) });
});

Deno.test("control.sock: an accept error (EMFILE, the daemon's fds filled) does not end the listener: once fds are free, control ops answer again", async () => {
  // The daemon runs under a low RLIMIT_NOFILE, so root's held connections (under its per-uid
  // cap) fill its fd table and the next accept fails EMFILE.
  await withTarget(async (t) => {
    const path = `${t.tree.run}/control.sock`;
    const pid = pidOf(t);
    const { open, limit } = fds(pid);
    assert(limit - open < MAX_CONNS_PER_UID, `only ${limit - open} fds left: lower the limit`);
    const held: Held[] = [];
    try {
      // Answered connections until the table is full; then one more, which cannot be accepted.
      for (let i = 0; i < MAX_CONNS_PER_UID && fds(pid).open < limit; i++) {
        const h = await ask(path);
        held.push(h);
        await h.first;
      }
      assertEquals(fds(pid).open, limit, "the daemon's fd table never filled");
      // Several wait in the backlog while every accept fails EMFILE.
      const queued: Held[] = [];
      for (let i = 0; i < 16; i++) queued.push(await ask(path));
      held.push(...queued);
      for (const h of held) if (!queued.includes(h)) h.socket.destroy();
      // The listener accepts again: every waiting connection is answered, and a new client too.
      const types = await Promise.all(queued.map((h) => h.first.then((f) => f.type)));
      assertEquals(types, Array(queued.length).fill("ps"));
      await t.bystander();
      const late = await ask(path);
      held.push(late);
      assertEquals((await late.first).type, "ps");
    } finally {
      for (const h of held) h.socket.destroy();
    }
    await otherStatus(t);
    await t.bystander();
  }, {
    setup: (tree) => Deno.chmodSync(tree.dir, 0o755),
    wrap: ["prlimit", `--nofile=${NOFILE}:${NOFILE}`, "--"],
  });
});

/** The daemon's RLIMIT_NOFILE in the EMFILE test: its own fds at rest plus a few dozen. */
const NOFILE = 80;

Deno.test("control.sock: a uid's terminals are bounded (MAX_TERMINALS_PER_UID): one more start is refused EAGAIN and starts no ctxterm; root's control ops and the mount still answer", async () => {
  const USER = 1000;
  await withTarget(async (t) => {
    const ws = `${t.tree.dir}/ws`;
    const start = (s: string) =>
      t.ctx(["agent", "start", "bob", "--json", "-s", s], { uid: USER, cwd: ws, ms: 60_000 });
    for (let i = 0; i < MAX_TERMINALS_PER_UID; i++) {
      const r = await start(`s${i}`);
      assertEquals(r.code, 0, `start s${i}: ${r.stdout} ${r.stderr}`);
    }
    const over = await start("over");
    assert(over.code !== 0, `the start over the cap succeeded: ${over.stdout}`);
    assertStringIncludes(over.stdout + over.stderr, "EAGAIN");
    const ps = await t.ctx(["agent", "ps", "--json"]);
    const frame = JSON.parse(ps.stdout.trim().split("\n").find((l) => l.startsWith("{")) ?? "{}");
    const sessions = frame.instances.flatMap((i: { terminals: { session: string }[] }) =>
      i.terminals.map((x) => x.session)
    ).sort();
    assertEquals(sessions, [...Array(MAX_TERMINALS_PER_UID).keys()].map((i) => `s${i}`).sort());
    await t.bystander();
    const stop = await t.ctx(["agent", "stop", "bob"]);
    assertEquals(stop.code, 0, stop.stderr);
  }, {
    setup: (tree) => {
      Deno.chmodSync(tree.dir, 0o755);
      createAgent(tree.root, "bob", { uid: USER, gid: USER });
      Deno.mkdirSync(`${tree.dir}/ws`, { mode: 0o755 });
      Deno.chownSync(`${tree.dir}/ws`, USER, USER);
    },
  });
});

Deno.test("control.sock: a request off its schema (an extra key, a wrong type, not an object) is EINVAL and does nothing; a well-formed one answers", async () => {
  await withTarget(async (t) => {
    const path = `${t.tree.run}/control.sock`;
    const answer = async (frame: unknown) => {
      const h = await ask(path, frame);
      try {
        return await h.first;
      } finally {
        h.socket.destroy();
      }
    };
    const bad: unknown[] = [
      { op: "status", agent: "coder", extra: 1 },
      { op: "stop", agent: "coder", force: true },
      { op: "start", agent: "coder", terminal: "no" },
      { op: "ps", agent: 5 },
      { op: "restart", agent: "coder" },
      ["ps"],
    ];
    for (const f of bad) {
      const a = await answer(f);
      assertEquals([a.type, a.code], ["error", "EINVAL"], JSON.stringify(f));
      await t.bystander();
    }
    assertEquals((await answer({ op: "status", agent: "coder" })).type, "status");
    // The refused start started nothing.
    const ps = await answer({ op: "ps" });
    const live = (ps.instances as { agent: string; terminals?: unknown[] }[])
      .filter((i) => i.agent === "coder" && (i.terminals?.length ?? 0) > 0);
    assertEquals(live, []);
  });
});
