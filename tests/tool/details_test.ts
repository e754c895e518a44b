/** Review details, run for real in the sandbox: fs.write/fs.replace name the rule that refused them; canonical CTX_PATH. */
import { assert, assertEquals } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { cleanup, toolTree } from "../fixture/mod.ts";

Deno.test("fs.write/fs.replace refusals carry the kernel's errno and name the rule; nothing changes", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    // A file of another (unmapped) owner in a writable dir: a rename would replace it and a
    // chown back to its owner fails with a raw EINVAL; the agent may not write it at all.
    Deno.writeTextFileSync(`${f.ws}/theirs.txt`, "theirs\n");
    Deno.chownSync(`${f.ws}/theirs.txt`, 4242, 4242);
    Deno.chmodSync(`${f.ws}/theirs.txt`, 0o644);
    // The agent's own read-only file: a rename would silently bypass its mode.
    Deno.writeTextFileSync(`${f.ws}/mine-ro.txt`, "ro\n");
    Deno.chmodSync(`${f.ws}/mine-ro.txt`, 0o444);
    const rule = "the Linux mode/owner does not let this agent write it";
    for (
      const [p, tool, input] of [
        ["theirs.txt", "fs.write", { path: "theirs.txt", content: "x" }],
        ["theirs.txt", "fs.replace", { path: "theirs.txt", old: "theirs", new: "x" }],
        ["mine-ro.txt", "fs.write", { path: "mine-ro.txt", content: "x" }],
      ] as const
    ) {
      const r = await runTsh([tool, JSON.stringify(input)], o);
      assertEquals(r, {
        name: tool,
        status: "error",
        errno: "EACCES",
        exitCode: 13,
        content: `EACCES: ${p}: ${tool} refused to write the file: ${rule}\n`,
        truncated: false,
      });
    }
    assertEquals(Deno.readTextFileSync(`${f.ws}/theirs.txt`), "theirs\n");
    assertEquals(Deno.readTextFileSync(`${f.ws}/mine-ro.txt`), "ro\n");
    assertEquals(Deno.statSync(`${f.ws}/theirs.txt`).uid, 4242);
    // No temp file was left behind.
    const names = [...Deno.readDirSync(f.ws)].map((e) => e.name).sort();
    assertEquals(names, [".git", "hello.txt", "mine-ro.txt", "theirs.txt"]);

    // The call: /etc/passwd is the sandbox's synthetic file, bound read-only.
    const p = await runTsh(["fs.write", '{"path":"/etc/passwd","content":"x"}'], o);
    assert(p.errno === "EACCES" || p.errno === "EROFS", p.content);
    assert(
      p.content.startsWith(`${p.errno}: /etc/passwd: fs.write refused to write the file: `),
      p.content,
    );
    assert(!p.content.includes("os error"), p.content);
    // A new file under a read-only mount: EROFS, naming the mount rule and the directory.
    const c = await runTsh(["fs.write", '{"path":"/ctx/tool/new","content":"x"}'], o);
    assertEquals(
      c.content,
      "EROFS: /ctx/tool/new: fs.write refused to create a file in /ctx/tool: it is on a read-only " +
        "mount of this sandbox (/ctx, system dirs, /etc entries, .git)\n",
    );
    const g = await runTsh(["fs.write", '{"path":"/workspace/.git/HEAD","content":"x"}'], o);
    assertEquals([g.errno, g.content.includes("read-only mount")], ["EROFS", true]);
    assertEquals(Deno.readTextFileSync(`${f.ws}/.git/HEAD`), "ref: refs/heads/main\n");
    // What the agent may write still works, and the new file is the agent's.
    const ok = await runTsh(["fs.write", '{"path":"new.txt","content":"hi"}'], o);
    assertEquals([ok.status, Deno.readTextFileSync(`${f.ws}/new.txt`)], ["ok", "hi"]);
  } finally {
    await cleanup(f);
  }
});

/** Runs the real `cli/tsh.ts` standalone (no agent) with exactly `env`. */
async function tsh(args: string[], env: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../cli/tsh.ts", import.meta.url).pathname, ...args],
    env,
    clearEnv: true,
    stdin: "null",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test("standalone tsh: $CTX_HOME/.tshrc exactly, an empty CTX_PATH= is refused loudly, entries are canonical", async () => {
  const f = await toolTree();
  try {
    const root = ["--root", f.root];
    // Inherited CTX_PATH with `.`, `..` and doubled slashes: canonical paths; `/ctx/../usr/bin` escapes.
    const env = { CTX_PATH: "/ctx/../usr/bin:/ctx/./tool//:/ctx//home/0/../0/tool" };
    assertEquals(await tsh([...root, "which", "fs.read"], env), {
      code: 0,
      stdout: "/ctx/tool/fs.read\n",
      stderr: "",
    });
    assertEquals((await tsh([...root, "which", "ls"], env)).code, 1);
    // $CTX_HOME/.tshrc, read from CTX_HOME itself: a trailing slash and a home that is not
    // /ctx/home/<uid> both work. The rc's path hides fs.read's directory.
    Deno.mkdirSync(`${f.root}/shared/team/tool`, { recursive: true });
    Deno.writeTextFileSync(`${f.root}/shared/team/.tshrc`, "CTX_PATH=/ctx/shared/team/tool\n");
    Deno.writeTextFileSync(`${f.root}/home/0/.tshrc`, "# mine\nCTX_PATH=/ctx/shared/team/tool\n");
    for (const home of ["/ctx/home/0/", "/ctx/shared/team", "/ctx//shared/./team/"]) {
      const r = await tsh([...root, "which", "fs.read"], { CTX_HOME: home, CTX_PATH: "/ctx/tool" });
      assertEquals([home, r.code, r.stdout], [home, 1, ""]);
    }
    // An empty CTX_PATH= would disable every tool: it is an error on stderr, and the file is
    // ignored in favour of the inherited CTX_PATH (then the default).
    Deno.writeTextFileSync(`${f.root}/home/0/.tshrc`, "CTX_PATH=\n");
    const e = await tsh([...root, "which", "fs.read"], {
      CTX_HOME: "/ctx/home/0/",
      CTX_PATH: "/ctx/tool",
    });
    assertEquals(e, {
      code: 0,
      stdout: "/ctx/tool/fs.read\n",
      stderr: 'tsh: EINVAL: .tshrc line 1: CTX_PATH="" names no directory under /ctx ' +
        "(an empty CTX_PATH would disable every tool); .tshrc ignored\n",
    });
    const d = await tsh([...root, "which", "fs.read"], { CTX_HOME: "/ctx/home/0" });
    assertEquals([d.code, d.stdout], [0, "/ctx/tool/fs.read\n"]);
  } finally {
    await cleanup(f);
  }
});
