/** Issue 8, hole 5: a sandbox never writes durable session history, through HOME, a workspace in the tree, or a cwd inside a session. */
import { assert, assertEquals } from "../assert.ts";
import { probe, q, type Target, withTarget } from "../fixture/mod.ts";

/** The default session of `coder` for uid 0, as a tree-relative path. */
const SESSION = "home/0/agent/coder/session/default";
/** The files a forger would rewrite. */
const FILES = ["events.jsonl", "messages.jsonl"];

/** The host's bytes of the session files (the backing tree: what the host wrote). */
async function history(t: Target): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const f of FILES) out[f] = await Deno.readTextFile(`${t.tree.root}/${SESSION}/${f}`);
  return out;
}

/**
 * The host keeps writing the session (every tsh call is recorded in it), so "unchanged" means:
 * what was there is still there, byte for byte, everything after it is JSON lines, and the
 * forger's token is nowhere.
 */
async function onlyHostWrote(t: Target, before: Record<string, string>, token: string) {
  const after = await history(t);
  for (const f of FILES) {
    assert(after[f].startsWith(before[f]), `${f} lost or changed what the host had written`);
    assert(!after[f].includes(token), `${f} holds the forged line`);
    for (const line of after[f].slice(before[f].length).split("\n").filter((l) => l)) {
      JSON.parse(line); // every appended line is the host's JSON record
    }
  }
}

/** A forged line, exported as $F: spelled in two quoted halves so the script never holds it. */
function forger(): { token: string; setup: string } {
  const token = `FORGED-${crypto.randomUUID()}`;
  return { token, setup: `export F=${q(token.slice(0, 4))}${q(token.slice(4))}` };
}

/** A real model turn, so the session exists on the host with host-written history. */
async function send(t: Target): Promise<void> {
  const r = await t.ctx(["agent", "send", "coder", "hi"]);
  assertEquals({ code: r.code, stdout: r.stdout, stderr: r.stderr }, {
    code: 0,
    stdout: "hi\n",
    stderr: "",
  });
}

Deno.test("a tool cannot write /home/agent/session (an empty read-only mask); after a real send the host's events and messages are only the host's", async () => {
  await withTarget(async (t) => {
    const ws = `${t.tree.dir}/ws`;
    await Deno.mkdir(ws);
    // Before any session exists: nothing can be planted for the host to adopt.
    assertEquals(
      await probe(
        t,
        [
          `echo "session: $(ls -A /home/agent/session | wc -l)"`,
          "err mkdir mkdir -p /home/agent/session/default",
          "err plant bash -c 'echo x > /home/agent/session/planted'",
          "err mv mv /home/agent/session /home/agent/old",
          "err home bash -c 'echo mine > /home/agent/notes'",
        ].join("\n"),
        ws,
      ),
      [
        "session: 0",
        "mkdir: Read-only file system",
        "plant: Read-only file system",
        "mv: Device or resource busy",
        "home: ok",
      ],
    );
    await send(t);
    const before = await history(t);
    const { token, setup } = forger();
    const via = (n: string, dir: string) =>
      FILES.map((f, i) => `err ${n}${i} bash -c 'echo "$F" >> ${dir}/${f}'`);
    const [seen] = await Promise.all([
      probe(
        t,
        [
          setup,
          `echo "session: $(ls -A /home/agent/session | wc -l)"`,
          ...via("home", "/home/agent/session/default"),
          ...via("ctx", `/ctx/${SESSION}`),
          `can readable test -r /ctx/${SESSION}/events.jsonl`,
        ].join("\n"),
        ws,
      ),
      t.bystander(),
    ]);
    assertEquals(seen, [
      "session: 0",
      "home0: No such file or directory",
      "home1: No such file or directory",
      "ctx0: Read-only file system",
      "ctx1: Read-only file system",
      "readable: yes",
    ]);
    await onlyHostWrote(t, before, token);
    assertEquals(
      await Deno.readTextFile(`${t.tree.root}/home/0/agent/coder/notes`),
      "mine\n",
    );
    await t.bystander();
  });
});

Deno.test("a workspace at <mount>/home/0: the tool writes its own files, /workspace/agent is masked, no session file changes", async () => {
  await withTarget(async (t) => {
    await send(t);
    const before = await history(t);
    const { token, setup } = forger();
    const [seen] = await Promise.all([
      probe(
        t,
        [
          setup,
          "err own bash -c 'echo mine > /workspace/notes.txt'",
          `echo "agent: $(ls -A /workspace/agent | wc -l)"`,
          `err events bash -c 'echo "$F" >> /workspace/agent/coder/session/default/events.jsonl'`,
          "err plant mkdir -p /workspace/agent/coder/session/default",
          "err mv mv /workspace/agent /workspace/agent.old",
        ].join("\n"),
        `${t.tree.mount}/home/0`,
      ),
      t.bystander(),
    ]);
    assertEquals(seen, [
      "own: ok",
      "agent: 0",
      "events: No such file or directory",
      "plant: Read-only file system",
      "mv: Device or resource busy",
    ]);
    assertEquals(await Deno.readTextFile(`${t.tree.mount}/home/0/notes.txt`), "mine\n");
    await onlyHostWrote(t, before, token);
    await t.bystander();
  });
});

Deno.test("a workspace at the tree's root (<mount>) is read-only (the control plane): history is seen as modes allow, never written", async () => {
  await withTarget(async (t) => {
    await send(t);
    const before = await history(t);
    const { token, setup } = forger();
    const [seen] = await Promise.all([
      probe(
        t,
        [
          setup,
          `echo "home: $(ls -A /workspace/home | wc -l) shared: $(ls -A /workspace/shared | wc -l)"`,
          `err events bash -c 'echo "$F" >> /workspace/${SESSION}/events.jsonl'`,
          `err messages bash -c 'echo "$F" >> /workspace/${SESSION}/messages.jsonl'`,
          "err mv mv /workspace/home /workspace/home.old",
        ].join("\n"),
        t.tree.mount,
      ),
      t.bystander(),
    ]);
    // The tree root is the control plane: bound read-only, so its home/ is visible (uid 0's dir)
    // and every write fails there, history included.
    assertEquals(seen, [
      "home: 1 shared: 0",
      "events: Read-only file system",
      "messages: Read-only file system",
      "mv: Read-only file system",
    ]);
    await onlyHostWrote(t, before, token);
    await t.bystander();
  });
});

Deno.test("a cwd inside a session (through the mount) is refused EACCES and nothing runs", async () => {
  await withTarget(async (t) => {
    await send(t);
    const cwds = [
      `${t.tree.mount}/${SESSION}`,
      `${t.tree.mount}/home/0/agent/coder/session`,
    ];
    for (const cwd of cwds) {
      const before = await history(t);
      const { token, setup } = forger();
      // Were it bound, /workspace would be the session itself (or hold it).
      const script = [
        setup,
        'echo "$F" > /workspace/ran; echo "$F" > ~/ran',
        'for f in /workspace/events.jsonl /workspace/default/events.jsonl; do echo "$F" >> "$f"; done',
      ].join("\n");
      const [r] = await Promise.all([
        t.ctx(["agent", "tsh", "coder", "--", "bash", script], { cwd }),
        t.bystander(),
      ]);
      assertEquals({ code: r.code, stdout: r.stdout, first: r.stderr.split("\n")[0] }, {
        code: 13,
        stdout: "",
        first:
          `EACCES: "/workspace" (from "${cwd}") lies in session history, which only the host writes: it cannot be bound read-write`,
      });
      for (const p of [`${cwd}/ran`, `${t.tree.root}/home/0/agent/coder/ran`]) {
        assertEquals(await Deno.lstat(p).then(() => "exists", () => "absent"), "absent", p);
      }
      await onlyHostWrote(t, before, token);
    }
    await t.bystander();
  });
});
