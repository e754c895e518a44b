import {
  type AgentDef,
  effectiveWindow,
  loadAgent,
  loadModel,
  loadTool,
  type ModelDef,
  resolveModel,
} from "./agent.ts";
import { CtxError } from "../abi/errno.ts";
import { asUser } from "../sys/fsid.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

function write(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const path = `${root}/${rel}`;
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    Deno.writeTextFileSync(path, text);
  }
}

/** A tree with a minimal agent (required controls only), a full agent, two models and a tool. */
function makeTree(root: string): void {
  write(root, {
    "model/debug/echo.d/driver": "debug\n",
    "model/debug/echo.d/limit": "131072\n",
    "model/debug/echo.d/cap": "chat\nstream\n",
    "model/test/full.d/driver": "agent=a,b\ndefault=c\n",
    "model/test/full.d/limit": "unknown\n",
    "model/test/full.d/cap": "chat\n",
    "model/test/full.d/fallback": "# first\ndebug/echo\n",
    "model/test/full.d/session": "socket\n",
    "model/test/full.d/effort": "high\n",
    "model/test/full.d/id": "full-2026\n",
    "agent/mini.d/owner": "1000\n",
    "agent/mini.d/label": "user_u:agent_r:agent_t:s0\n",
    "agent/mini.d/model": "main\n",
    "agent/mini.d/perm": "r--\n",
    "agent/mini.d/abi": "sdk-envelope-v1\n",
    "agent/full.d/owner": "0\n",
    "agent/full.d/uid": "1000\n",
    "agent/full.d/gid": "100\n",
    "agent/full.d/groups": "27\n",
    "agent/full.d/label": "user_u:agent_r:coder_t:s0\n",
    "agent/full.d/root": "/ctx/home/1000/agent/full/root\n",
    "agent/full.d/cwd": "/src\n",
    "agent/full.d/env": "LANG=C.UTF-8\n",
    "agent/full.d/path": "/ctx/tool\n",
    "agent/full.d/mount": "/ctx\t/ctx\tro\trbind,nosuid,nodev\n",
    "agent/full.d/model": "debug/echo\n",
    "agent/full.d/window": "4096\n",
    "agent/full.d/perm": "rwx\n",
    "agent/full.d/abi": "sdk-envelope-v1\n",
    "agent/full.d/approval": "ask\n",
    "agent/full.d/tools": "fs.read\n",
    "agent/full.d/policy": "allow coder_t tool:fs.read execute\n",
    "agent/full.d/system.md": "Be terse.\n",
    "agent/full.d/prompt.template.md": "{{system}}\n",
    "agent/full.d/meta.json": '{"about":"test"}\n',
    "agent/full.d/status": "dead\n",
    "tool/fs.read.d/name": "fs.read\n",
    "tool/fs.read.d/description": "Read a file.\n",
    "tool/fs.read.d/schema": '{"type":"object"}\n',
    "tool/fs.read.d/cap": "read\n",
    "tool/fs.read.d/policy": "allow coder_t tool:fs.read execute\n",
  });
  Deno.symlinkSync("debug/echo", `${root}/model/main`);
  Deno.symlinkSync("main", `${root}/model/alias2`);
  Deno.symlinkSync("../debug/echo", `${root}/model/test/echo`);
  Deno.symlinkSync("mini", `${root}/agent/main`);
}

/** Directories 0755 and files 0644 below root, symlinks untouched. */
function chmodTree(dir: string): void {
  Deno.chmodSync(dir, 0o755);
  for (const e of Deno.readDirSync(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) chmodTree(path);
    else if (e.isFile) Deno.chmodSync(path, 0o644);
  }
}

async function withTree(fn: (root: string) => void): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "ctx-agent-" });
  try {
    makeTree(root);
    fn(root);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("loadAgent() applies the documented defaults to absent optional controls", () =>
  withTree((root) => {
    const expected: AgentDef = {
      name: "mini",
      dir: `${root}/agent/mini.d`,
      owner: 1000,
      uid: 1000,
      gid: 1000,
      groups: [],
      label: { user: "user_u", role: "agent_r", type: "agent_t", level: "s0" },
      subject: "agent_t",
      root: undefined,
      cwd: "/workspace",
      env: {},
      path: ["/ctx/tool", "/ctx/home/1000/tool"],
      mount: [],
      model: "main",
      window: "auto",
      perm: { r: true, w: false, x: false },
      abi: "sdk-envelope-v1",
      approval: "auto",
      rlimit: {},
      tools: [],
      policy: [],
      system: "",
      template: undefined,
      meta: {},
    };
    assertEquals(loadAgent(root, "mini"), expected);
    assertEquals(loadAgent(root, "main"), expected); // agent/main -> mini
  }));

Deno.test("loadAgent() parses every control of a full agent", () =>
  withTree((root) => {
    assertEquals(loadAgent(root, "full"), {
      name: "full",
      dir: `${root}/agent/full.d`,
      owner: 0,
      uid: 1000,
      gid: 100,
      groups: [27],
      label: { user: "user_u", role: "agent_r", type: "coder_t", level: "s0" },
      subject: "coder_t",
      root: "/ctx/home/1000/agent/full/root",
      cwd: "/src",
      env: { LANG: "C.UTF-8" },
      path: ["/ctx/tool"],
      mount: [{
        source: "/ctx",
        target: "/ctx",
        mode: "ro",
        options: ["rbind", "nosuid", "nodev"],
      }],
      model: "debug/echo",
      window: 4096,
      perm: { r: true, w: true, x: true },
      abi: "sdk-envelope-v1",
      approval: "ask",
      rlimit: {},
      tools: ["fs.read"],
      policy: [{ subject: "coder_t", class: "tool", object: "fs.read", permission: "execute" }],
      system: "Be terse.\n",
      template: "{{system}}\n",
      meta: { about: "test" },
    });
  }));

Deno.test("loadAgent() re-reads controls on every call", () =>
  withTree((root) => {
    assertEquals(loadAgent(root, "mini").perm, { r: true, w: false, x: false });
    Deno.writeTextFileSync(`${root}/agent/mini.d/perm`, "rw-\n");
    assertEquals(loadAgent(root, "mini").perm, { r: true, w: true, x: false });
  }));

Deno.test({
  name:
    "loadAgent() with secrets: false never reads env: a uid that may not read the 0600 env still loads the agent's identity and authority",
  ignore: Deno.uid() !== 0, // borrowing another uid needs root
  fn: () =>
    withTree((root) => {
      // Modes as in a real tree, whatever the umask (CI's may be 077): everything
      // world-readable except env.
      chmodTree(root);
      Deno.chmodSync(`${root}/agent/full.d/env`, 0o600);
      const other = { uid: 1000, gid: 1000 };
      const e = assertThrows(() => asUser(other, () => loadAgent(root, "full")), CtxError);
      assertEquals([e.errno, e.path], ["EACCES", `${root}/agent/full.d/env`]);
      const def = asUser(other, () => loadAgent(root, "full", { secrets: false }));
      assertEquals({ ...def, env: {} }, { ...loadAgent(root, "full"), env: {} });
      assertEquals([def.env, loadAgent(root, "full").env], [{}, { LANG: "C.UTF-8" }]);
    }),
});

Deno.test("loadAgent() reports missing required, invalid and non-file controls with their path", () =>
  withTree((root) => {
    const err = (fn: () => unknown) => {
      const e = assertThrows(fn, CtxError);
      return { errno: e.errno, message: e.message, path: e.path };
    };
    assertEquals(err(() => loadAgent(root, "ghost")), {
      errno: "ENOENT",
      message: `no agent "ghost"`,
      path: "agent/ghost.d",
    });
    assertEquals(err(() => loadAgent(root, "../x")).errno, "EINVAL");
    Deno.removeSync(`${root}/agent/mini.d/abi`);
    assertEquals(err(() => loadAgent(root, "mini")), {
      errno: "ENOENT",
      message: `required control "abi" is missing`,
      path: `${root}/agent/mini.d/abi`,
    });
    Deno.writeTextFileSync(`${root}/agent/mini.d/abi`, "sdk-envelope-v1\n");
    Deno.writeTextFileSync(`${root}/agent/mini.d/window`, "01\n");
    assertEquals(err(() => loadAgent(root, "mini")), {
      errno: "EINVAL",
      message: `"window": "01" has a leading zero`,
      path: `${root}/agent/mini.d/window`,
    });
    Deno.removeSync(`${root}/agent/mini.d/window`);
    Deno.symlinkSync("/etc/passwd", `${root}/agent/mini.d/system.md`);
    assertEquals(err(() => loadAgent(root, "mini")), {
      errno: "EINVAL",
      message: `"system.md" is not a regular file`,
      path: `${root}/agent/mini.d/system.md`,
    });
  }));

Deno.test("loadModel() resolves aliases and applies defaults", () =>
  withTree((root) => {
    const echo: ModelDef = {
      ref: "debug/echo",
      provider: "debug",
      model: "echo",
      id: "echo",
      dir: `${root}/model/debug/echo.d`,
      limit: 131072,
      driver: { default: ["debug"] },
      cap: ["chat", "stream"],
      fallback: [],
      session: "none",
      effort: "auto",
    };
    assertEquals(loadModel(root, "debug/echo"), echo);
    assertEquals(loadModel(root, "main"), echo);
    assertEquals(loadModel(root, "alias2"), echo); // alias of an alias
    assertEquals(loadModel(root, "test/echo"), echo); // relative link inside a provider dir
    assertEquals(loadModel(root, "test/full"), {
      ref: "test/full",
      provider: "test",
      model: "full",
      id: "full-2026", // the provider's name, from the `id` control
      dir: `${root}/model/test/full.d`,
      limit: "unknown",
      driver: { agent: ["a", "b"], default: ["c"] },
      cap: ["chat"],
      fallback: ["debug/echo"],
      session: "socket",
      effort: "high",
    });
    assertEquals(assertThrows(() => resolveModel(root, "test"), CtxError).errno, "ENOENT");
    assertEquals(assertThrows(() => resolveModel(root, "nope/x"), CtxError).errno, "ENOENT");
    Deno.symlinkSync("../../etc", `${root}/model/escape`);
    assertEquals(assertThrows(() => resolveModel(root, "escape"), CtxError).errno, "EINVAL");
    Deno.symlinkSync("loop", `${root}/model/loop`);
    assertEquals(assertThrows(() => resolveModel(root, "loop"), CtxError).errno, "ELOOP");
  }));

Deno.test("loadTool() reads <dir>/<name>.d and checks the name control", () =>
  withTree((root) => {
    assertEquals(loadTool(`${root}/tool`, "fs.read"), {
      name: "fs.read",
      dir: `${root}/tool/fs.read.d`,
      description: "Read a file.\n",
      schema: { type: "object" },
      cap: ["read"],
      policy: [{ subject: "coder_t", class: "tool", object: "fs.read", permission: "execute" }],
    });
    assertEquals(assertThrows(() => loadTool(`${root}/tool`, "bash"), CtxError).errno, "ENOENT");
    Deno.writeTextFileSync(`${root}/tool/fs.read.d/name`, "fs.write\n");
    const e = assertThrows(() => loadTool(`${root}/tool`, "fs.read"), CtxError);
    assertEquals([e.errno, e.message], [
      "EINVAL",
      `"name": "fs.write" does not match the tool "fs.read"`,
    ]);
  }));

Deno.test("effectiveWindow(): auto follows the model, a number is kept, an unfit model is ineligible", () =>
  withTree((root) => {
    const echo = loadModel(root, "debug/echo");
    const full = loadModel(root, "test/full");
    assertEquals(effectiveWindow(loadAgent(root, "mini"), echo), 131072);
    assertEquals(effectiveWindow(loadAgent(root, "mini"), full), undefined);
    assertEquals(effectiveWindow(loadAgent(root, "full"), echo), 4096);
    const e = assertThrows(() => effectiveWindow(loadAgent(root, "full"), full), CtxError);
    assertEquals([e.errno, e.message], [
      "EINVAL",
      "window 4096 needs a known limit, but test/full has limit unknown",
    ]);
  }));

Deno.test("loadModel() limit precedence: the model's limit control, then the built-in catalog by <provider>/<id>, then unknown", () => {
  const root = Deno.makeTempDirSync();
  try {
    write(root, {
      "model/openai/mini.d/driver": "openai-chat\n",
      "model/openai/mini.d/id": "gpt-4o-mini\n",
      "model/openai/gpt-4o.d/driver": "openai-chat\n",
      "model/openai/own.d/driver": "openai-chat\n",
      "model/openai/own.d/id": "gpt-4o-mini\n",
      "model/openai/own.d/limit": "1000\n",
      "model/openai/own2.d/driver": "openai-chat\n",
      "model/openai/own2.d/id": "gpt-4o-mini\n",
      "model/openai/own2.d/limit": "unknown\n",
      "model/local/gpt-4o.d/driver": "openai-chat\n",
    });
    for (const m of ["openai/mini", "openai/gpt-4o", "openai/own", "openai/own2", "local/gpt-4o"]) {
      Deno.writeTextFileSync(`${root}/model/${m}`, "");
    }
    const limits = ["openai/mini", "openai/gpt-4o", "openai/own", "openai/own2", "local/gpt-4o"]
      .map((m) => loadModel(root, m).limit);
    assertEquals(limits, [128000, 128000, 1000, "unknown", "unknown"]);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
