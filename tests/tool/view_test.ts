/** The agent's mount, root and cwd controls, run for real: tsh in bwrap over a real tree. */
import { assert, assertEquals, assertStringIncludes } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { cleanup, exists, grant, toolTree } from "../fixture/mod.ts";

async function dir(files: Record<string, string> = {}): Promise<string> {
  const d = Deno.realPathSync(await Deno.makeTempDir({ prefix: "cortexfs-view-" }));
  await Deno.chmod(d, 0o777);
  for (const [name, text] of Object.entries(files)) Deno.writeTextFileSync(`${d}/${name}`, text);
  return d;
}

Deno.test("mount lines bind ro and rw as policy grants them; without the grant nothing runs", async () => {
  const f = await toolTree();
  const ro = await dir({ "f.txt": "from ro\n" });
  const rw = await dir();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    f.set("mount", `${ro}\t/srv/ro\tro\trbind,nosuid,nodev\n${rw}\t/srv/rw\trw\t-\n`);
    // The control alone grants nothing: policy must allow the bind too.
    const denied = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals(denied, {
      name: "bash",
      status: "error",
      errno: "EACCES",
      exitCode: 13,
      content: 'EACCES: "mount" line for "/srv/ro" of agent "coder" needs ' +
        '"allow coder_t mount:/srv/ro read" in its policy\n',
      truncated: false,
    });
    assert(!exists(`${f.ws}/marker`));
    grant(f, "allow coder_t mount:/srv/ro read\nallow coder_t mount:/srv/rw read\n");
    const half = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals([half.errno, half.content.includes("mount:/srv/rw write")], ["EACCES", true]);
    assert(!exists(`${f.ws}/marker`));
    grant(f, "allow coder_t mount:/srv/rw write\n");
    const r = await runTsh([
      "bash",
      "cat /srv/ro/f.txt; touch /srv/ro/x 2>&1 | grep -o 'Read-only file system'; " +
      "echo out > /srv/rw/made; grep ' /srv/' /proc/self/mountinfo | cut -d' ' -f5,6 | sort",
    ], o);
    assertEquals(
      r.content,
      "from ro\nRead-only file system\n" +
        "/srv/ro ro,nosuid,nodev,relatime\n/srv/rw rw,nosuid,nodev,relatime\n",
    );
    assertEquals(Deno.readTextFileSync(`${rw}/made`), "out\n");
    assert(!exists(`${ro}/x`));
  } finally {
    await cleanup(f);
    await Deno.remove(ro, { recursive: true });
    await Deno.remove(rw, { recursive: true });
  }
});

Deno.test("mount options bubblewrap cannot enforce, runtime-owned targets and rw control plane are refused before spawn", async () => {
  const f = await toolTree();
  const src = await dir();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    const cases: [string, string, string][] = [
      [`${src}\t/srv\tro\tnoexec\n`, "ENOTSUP", "bubblewrap cannot mount noexec"],
      [
        `${src}\t/ctx/tool\tro\t-\n`,
        "EACCES",
        'target "/ctx/tool" is owned by the sandbox runtime',
      ],
      [`/ctx/agent/coder.d\t/srv\trw\t-\n`, "EACCES", "control plane"],
      [`${src}/missing\t/srv\tro\t-\n`, "ENOENT", "does not exist"],
    ]; // deno-fmt-ignore
    for (const [text, errno, why] of cases) {
      f.set("mount", text);
      const target = text.split("\t")[1];
      grant(f, `allow coder_t mount:${target} read\nallow coder_t mount:${target} write\n`);
      const r = await runTsh(["bash", "touch /workspace/marker"], o);
      assertEquals(r.errno, errno, r.content);
      assertStringIncludes(r.content, why);
      assert(!exists(`${f.ws}/marker`));
    }
  } finally {
    await cleanup(f);
    await Deno.remove(src, { recursive: true });
  }
});

Deno.test("a mount line targeting /workspace replaces the peer cwd; its .git stays read-only", async () => {
  const f = await toolTree();
  const other = await dir({ "mine.txt": "other workspace\n" });
  try {
    Deno.mkdirSync(`${other}/.git`);
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    f.set("mount", `${other}\t/workspace\trw\t-\n`);
    grant(f, "allow coder_t mount:/workspace read\nallow coder_t mount:/workspace write\n");
    const r = await runTsh([
      "bash",
      "pwd; ls; echo w > /workspace/new; touch .git/x 2>&1 | grep -o 'Read-only file system'",
    ], o);
    assertEquals(r.content, "/workspace\nmine.txt\nRead-only file system\n");
    assertEquals(Deno.readTextFileSync(`${other}/new`), "w\n");
    assert(!exists(`${f.ws}/new`));
    assertEquals((await runTsh(["fs.read", "mine.txt"], o)).content, "other workspace\n");
    // Read-only when the line says so.
    f.set("mount", `${other}\t/workspace\tro\t-\n`);
    const w = await runTsh(["fs.write", "new2", "x"], o);
    assertEquals([w.errno, exists(`${other}/new2`)], ["EROFS", false]);
  } finally {
    await cleanup(f);
    await Deno.remove(other, { recursive: true });
  }
});

Deno.test("cwd is the start dir: it must exist in the view (ENOENT) and lie inside it (EACCES)", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    Deno.mkdirSync(`${f.ws}/sub`);
    Deno.writeTextFileSync(`${f.ws}/sub/here.txt`, "relative\n");
    f.set("cwd", "/workspace/sub\n");
    assertEquals((await runTsh(["bash", "pwd"], o)).content, "/workspace/sub\n");
    assertEquals((await runTsh(["fs.read", "here.txt"], o)).content, "relative\n");
    f.set("cwd", "/workspace/none\n");
    const missing = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals([missing.errno, missing.content], [
      "ENOENT",
      'ENOENT: "cwd": "/workspace/none" does not exist in the view\n',
    ]);
    f.set("cwd", "/root\n");
    const outside = await runTsh(["bash", "touch /workspace/marker"], o);
    assertEquals([outside.errno, outside.content], [
      "EACCES",
      'EACCES: "cwd": "/root" is outside the agent\'s view\n',
    ]);
    assert(!exists(`${f.ws}/marker`));
  } finally {
    await cleanup(f);
  }
});

Deno.test("root is the base of the view: its files appear at /, standard binds stay on top", async () => {
  const f = await toolTree();
  const base = await dir({ "hello": "from root\n" });
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    f.set("root", `${base}\n`);
    const denied = await runTsh(["bash", "cat /hello"], o);
    assertEquals(denied.errno, "EACCES");
    assertStringIncludes(denied.content, '"allow coder_t mount:/ read"');
    grant(f, "allow coder_t mount:/ read\nallow coder_t mount:/ write\n");
    const r = await runTsh(["bash", "cat /hello; pwd; cat /ctx/agent/coder.d/perm"], o);
    assertEquals(r.content, "from root\n/workspace\nrwx\n");
    // A root inside the tree's control plane is refused.
    f.set("root", "/ctx/agent\n");
    assertEquals((await runTsh(["bash", "true"], o)).errno, "EACCES");
  } finally {
    await cleanup(f);
    await Deno.remove(base, { recursive: true });
  }
});
