import { assertEquals } from "../../tests/assert.ts";
import { MAX_RULE_FILE } from "../abi/prompt.ts";
import { ancestors, discoverRules, discoverSkills, frontMatter, loadedTools } from "./collect.ts";
import { dirSource } from "./source.ts";

const id = { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0 };

async function tree(files: Record<string, string>) {
  const dir = await Deno.makeTempDir({ prefix: "ctx-prompt-" });
  for (const [rel, text] of Object.entries(files)) {
    const p = `${dir}/${rel}`;
    Deno.mkdirSync(p.slice(0, p.lastIndexOf("/")), { recursive: true });
    Deno.writeTextFileSync(p, text);
  }
  return dir;
}

Deno.test("ancestors() lists the workspace root down to the cwd, nothing outside it", () => {
  assertEquals(ancestors("/workspace", "/workspace"), [""]);
  assertEquals(ancestors("/workspace", "/workspace/a/b/"), ["", "a", "a/b"]);
  assertEquals(ancestors("/workspace", "/elsewhere/a"), [""]);
  assertEquals(ancestors("/workspace", "/workspace2"), [""]);
});

Deno.test("dirSource() reads regular files only: a symlink (last or inner component), a FIFO and a directory are absent; long files are cut", async () => {
  const ws = await tree({
    "AGENTS.md": "root rule\n",
    "big/AGENTS.md": "b".repeat(MAX_RULE_FILE + 10),
  });
  const outside = await tree({ "AGENTS.md": "outside secret\n", "x/AGENTS.md": "inner secret\n" });
  try {
    Deno.mkdirSync(`${ws}/a`);
    Deno.symlinkSync(`${outside}/AGENTS.md`, `${ws}/a/AGENTS.md`);
    Deno.symlinkSync(`${outside}/x`, `${ws}/link`);
    Deno.mkdirSync(`${ws}/fifo`);
    new Deno.Command("mkfifo", { args: [`${ws}/fifo/AGENTS.md`] }).outputSync();
    Deno.mkdirSync(`${ws}/dir/AGENTS.md`, { recursive: true });
    const s = dirSource(ws, { at: "/workspace", id });
    if (!s) throw new Error("no source");
    try {
      assertEquals(s.read("AGENTS.md", 100), { text: "root rule\n", truncated: false });
      assertEquals(s.read("a/AGENTS.md", 100), undefined);
      assertEquals(s.read("link/AGENTS.md", 100), undefined);
      assertEquals(s.read("fifo/AGENTS.md", 100), undefined);
      assertEquals(s.read("dir/AGENTS.md", 100), undefined);
      assertEquals(s.read("../AGENTS.md", 100), undefined);
      assertEquals(s.read("big/AGENTS.md", 5), { text: "bbbbb", truncated: true });
      assertEquals(s.dirs(""), ["a", "big", "dir", "fifo"]);
      const rules = discoverRules({ workspace: s, cwd: "/workspace/big" });
      assertEquals(rules.map((r) => [r.path, r.truncated]), [
        ["/workspace/AGENTS.md", false],
        ["/workspace/big/AGENTS.md", true],
      ]);
    } finally {
      s.close();
    }
  } finally {
    await Deno.remove(ws, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
});

Deno.test("discoverSkills() takes name and description from front matter, the directory name otherwise; a symlinked skill dir is not followed", async () => {
  const home = await tree({
    ".agents/skills/one/SKILL.md": '---\nname: first\ndescription: "Does one thing."\n---\nbody\n',
    ".codex/skills/group/two/SKILL.md": "no front matter\n",
    ".agents/skills/one/nested/SKILL.md": "---\nname: hidden\n---\n",
  });
  const other = await tree({ "evil/SKILL.md": "---\nname: evil\n---\n" });
  try {
    Deno.symlinkSync(`${other}/evil`, `${home}/.agents/skills/evil`);
    const s = dirSource(home, { at: "/home/agent", id });
    if (!s) throw new Error("no source");
    try {
      assertEquals(discoverSkills({ home: s, cwd: "/workspace" }), [
        {
          name: "first",
          description: "Does one thing.",
          path: "/home/agent/.agents/skills/one/SKILL.md",
        },
        { name: "two", description: "", path: "/home/agent/.codex/skills/group/two/SKILL.md" },
      ]);
      assertEquals(loadedTools(s), []);
    } finally {
      s.close();
    }
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(other, { recursive: true });
  }
});

Deno.test("frontMatter() reads only name and description of a leading --- block", () => {
  assertEquals(frontMatter("---\nname: a\nother: x\ndescription: 'b c'\n---\n"), {
    name: "a",
    description: "b c",
  });
  assertEquals(frontMatter("name: a\n"), {});
});

Deno.test({
  name:
    "dirSource() reads as the agent's identity: a file only root may read is absent for another uid",
  ignore: Deno.uid() !== 0,
  async fn() {
    const ws = await tree({ "AGENTS.md": "root only\n", "open/AGENTS.md": "anyone\n" });
    try {
      Deno.chmodSync(`${ws}/AGENTS.md`, 0o600);
      Deno.chmodSync(ws, 0o755);
      const s = dirSource(ws, { at: "/workspace", id: { uid: 65534, gid: 65534 } });
      if (!s) throw new Error("no source");
      try {
        assertEquals(s.read("AGENTS.md", 100), undefined);
        assertEquals(s.read("open/AGENTS.md", 100), { text: "anyone\n", truncated: false });
      } finally {
        s.close();
      }
    } finally {
      await Deno.remove(ws, { recursive: true });
    }
  },
});
