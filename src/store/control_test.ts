import { classify, type ControlRef, tempControl, writeControl } from "./control.ts";
import { CtxError, ignore } from "../abi/errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";

const enc = new TextEncoder();

/** A small real tree: models with known, small, unknown and absent limits, an agent, a tool. */
function makeTree(root: string): void {
  const files: Record<string, string> = {
    "model/debug/echo": "#!/usr/bin/cortexfs-object-runner\n",
    "model/debug/echo.d/driver": "debug\n",
    "model/debug/echo.d/cap": "chat\nstream\n",
    "model/debug/echo.d/limit": "131072\n",
    "model/test/small.d/driver": "debug\n",
    "model/test/small.d/limit": "4096\n",
    "model/test/nolimit.d/driver": "debug\n",
    "model/test/nolimit.d/limit": "unknown\n",
    "model/test/bare.d/driver": "debug\n",
    "agent/coder": "#!/usr/bin/cortexfs-object-runner\n",
    "agent/coder.d/owner": "1000\n",
    "agent/coder.d/label": "user_u:agent_r:coder_t:s0\n",
    "agent/coder.d/model": "debug/echo\n",
    "agent/coder.d/window": "auto\n",
    "agent/coder.d/perm": "rwx\n",
    "agent/coder.d/abi": "sdk-envelope-v1\n",
    "agent/coder.d/policy": "allow coder_t tool:fs.read execute\n",
    "agent/coder.d/status": "dead\n",
    "agent/coder.d/pid": "",
    "agent/coder.d/log": "",
    "tool/fs.read.d/name": "fs.read\n",
    "tool/fs.read.d/description": "Read a file.\n",
    "tool/fs.read.d/schema": "{}\n",
    "tool/fs.read.d/cap": "read\n",
    "tool/fs.read.d/policy": "allow coder_t tool:fs.read execute\n",
  };
  for (const [rel, text] of Object.entries(files)) {
    const path = `${root}/${rel}`;
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    Deno.writeTextFileSync(path, text);
  }
  Deno.symlinkSync("debug/echo", `${root}/model/main`);
  Deno.symlinkSync("coder", `${root}/agent/main`);
}

async function withTree(fn: (root: string) => void | Promise<void>): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "ctx-control-" });
  try {
    makeTree(root);
    await fn(root);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

const read = (root: string, rel: string) => Deno.readTextFileSync(`${root}/${rel}`);
const set = (root: string, rel: string, text: string, uid?: number) =>
  writeControl(root, rel, enc.encode(text), uid === undefined ? {} : { uid });

/** Asserts the write fails with `errno` and `message`, and that the file and directory are unchanged. */
function rejected(
  root: string,
  rel: string,
  bytes: string | Uint8Array,
  errno: string,
  message: string,
  uid?: number,
) {
  const path = `${root}/${rel}`;
  const dir = path.slice(0, path.lastIndexOf("/"));
  const before = (() => {
    try {
      return Deno.readFileSync(path);
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.IsADirectory);
      return null;
    }
  })();
  const list = () => {
    try {
      return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.IsADirectory);
      return null;
    }
  };
  const listing = list();
  const data = typeof bytes === "string" ? enc.encode(bytes) : bytes;
  const e = assertThrows(
    () => writeControl(root, rel, data, uid === undefined ? {} : { uid }),
    CtxError,
  );
  assertEquals({ errno: e.errno, message: e.message, path: e.path }, { errno, message, path: rel });
  const after = (() => {
    try {
      return Deno.readFileSync(path);
    } catch (e) {
      ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory, Deno.errors.IsADirectory);
      return null;
    }
  })();
  assertEquals(after, before, `${rel} changed`);
  assertEquals(list(), listing, "leftover files");
}

Deno.test("classify() names the object and control of .d paths, null elsewhere", () => {
  const rows: [string, ControlRef | null][] = [
    ["agent/coder.d/window", { kind: "agent", object: "coder", control: "window", base: "agent" }],
    ["model/debug/echo.d/cap", {
      kind: "model",
      object: "debug/echo",
      control: "cap",
      base: "model",
    }],
    ["tool/fs.read.d/schema", { kind: "tool", object: "fs.read", control: "schema", base: "tool" }],
    ["home/1000/tool/x.d/cap", {
      kind: "tool",
      object: "x",
      control: "cap",
      base: "home/1000/tool",
    }],
    ["home/1000/model/p/m.d/cap", {
      kind: "model",
      object: "p/m",
      control: "cap",
      base: "home/1000/model",
    }],
    ["agent/coder.d/nope", { kind: "agent", object: "coder", control: "nope", base: "agent" }],
    ["agent/coder", null],
    ["agent/coder.d", null],
    ["agent/coder.d/hooks/pre.d/x", null],
    ["agent/.d/window", null],
    ["/agent/coder.d/window", null],
    ["agent//coder.d/window", null],
    ["model/echo.d/cap", null],
    ["home/1000/agent/coder.d/window", null],
    ["home/01/tool/x.d/cap", null],
    ["status", null],
    ["shared/x.d/y", null],
  ];
  assertEquals(rows.map(([p]) => [p, classify(p)]), rows);
});

Deno.test("tempControl() recognises the temp names of atomic replace", () => {
  assertEquals(
    [".window.tmp-12-9f3a", ".system.md.tmp-1-ab-2", "window", ".window.tmp-x-1", ".tmp-1-2"].map(
      tempControl,
    ),
    ["window", "system.md", null, null, null],
  );
});

Deno.test("writeControl() replaces a valid control with exactly the given bytes", () =>
  withTree((root) => {
    set(root, "agent/coder.d/window", "4096\n");
    assertEquals(read(root, "agent/coder.d/window"), "4096\n");
    set(root, "agent/coder.d/window", "auto\n");
    assertEquals(read(root, "agent/coder.d/window"), "auto\n");
    set(root, "model/debug/echo.d/cap", "chat\n");
    assertEquals(read(root, "model/debug/echo.d/cap"), "chat\n");
    set(root, "tool/fs.read.d/schema", '{"type":"object"}');
    assertEquals(read(root, "tool/fs.read.d/schema"), '{"type":"object"}');
  }));

Deno.test("writeControl() rejects every bad window and leaves the file byte-for-byte unchanged", () =>
  withTree((root) => {
    const rel = "agent/coder.d/window";
    const rows: [string, string][] = [
      ["0\n", `"0" is zero (must be a positive number)`],
      ["01\n", `"01" has a leading zero`],
      ["+1\n", `"+1" has a sign`],
      [" 1\n", `" 1" has whitespace`],
      ["1", `"1" must end with a newline`],
      ["1\n\n", `"1\\n\\n" has extra lines (a one-value file has exactly one line)`],
      ["4294967296\n", `"4294967296" is larger than 4294967295`],
      ["auto", `"auto" must end with a newline`],
      ["AUTO\n", `"AUTO" is not "auto" or a positive number`],
      ["-1\n", `"-1" has a sign`],
    ];
    for (const [text, why] of rows) {
      rejected(root, rel, text, "EINVAL", `Cannot set "window": ${why}`);
    }
    assertEquals(read(root, rel), "auto\n");
  }));

Deno.test("writeControl() checks path, size and encoding before the format", () =>
  withTree((root) => {
    rejected(
      root,
      "agent/coder.d/iso",
      "shared\n",
      "EINVAL",
      `Cannot set "iso": "iso" is not a control (not in the agent table)`,
    );
    rejected(
      root,
      "agent/ghost.d/window",
      "auto\n",
      "ENOENT",
      `Cannot set "window": no agent "ghost"`,
    );
    rejected(
      root,
      "agent/x y.d/window",
      "auto\n",
      "EINVAL",
      `Cannot set "window": agent name "x y" contains whitespace`,
    );
    rejected(
      root,
      "agent/coder.d/system.md",
      "x".repeat(65537),
      "EMSGSIZE",
      `Cannot set "system.md": 65537 bytes is over the 65536 byte limit`,
    );
    rejected(
      root,
      "agent/coder.d/system.md",
      new Uint8Array([0x68, 0xff, 0x0a]),
      "EINVAL",
      `Cannot set "system.md": the bytes are not UTF-8`,
    );
    // A byte-order mark is bytes, not decoration: the one canonical line does not start with it.
    const bom = (t: string) => new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(t)]);
    for (const [path, text] of [["window", "auto\n"], ["perm", "r--\n"]]) {
      const before = read(root, `agent/coder.d/${path}`);
      const e = assertThrows(
        () => writeControl(root, `agent/coder.d/${path}`, bom(text)),
        CtxError,
      );
      assertEquals([e.errno, read(root, `agent/coder.d/${path}`)], ["EINVAL", before]);
    }
    rejected(root, "agent/coder", "x\n", "EINVAL", `Cannot set "agent/coder": not a control file`);
    set(root, "agent/coder.d/system.md", "x".repeat(65536));
    assertEquals(read(root, "agent/coder.d/system.md").length, 65536);
  }));

Deno.test("writeControl() answers EROFS for projections (limit, status, pid, log), even for uid 0", () =>
  withTree((root) => {
    rejected(
      root,
      "model/debug/echo.d/limit",
      "4096\n",
      "EROFS",
      `Cannot set "limit": "limit" is read-only (projected by the runtime)`,
      0,
    );
    for (const c of ["status", "pid", "log"]) {
      rejected(
        root,
        `agent/coder.d/${c}`,
        "ready\n",
        "EROFS",
        `Cannot set "${c}": "${c}" is read-only (projected by the runtime)`,
      );
    }
    rejected(
      root,
      "tool/fs.read.d/status",
      "ready\n",
      "EROFS",
      `Cannot set "status": "status" is read-only (projected by the runtime)`,
    );
  }));

Deno.test("an explicit window needs the agent's model to have a known limit not smaller than it", () =>
  withTree((root) => {
    set(root, "agent/coder.d/window", "131072\n");
    rejected(
      root,
      "agent/coder.d/window",
      "131073\n",
      "EINVAL",
      `Cannot set "window": window 131073 is larger than the limit 131072 of debug/echo`,
    );
    set(root, "agent/coder.d/window", "auto\n");
    set(root, "agent/coder.d/model", "test/nolimit\n");
    rejected(
      root,
      "agent/coder.d/window",
      "1\n",
      "EINVAL",
      `Cannot set "window": window 1 needs a known limit, but test/nolimit has limit unknown`,
    );
    set(root, "agent/coder.d/model", "test/bare\n"); // no limit file: unknown
    rejected(
      root,
      "agent/coder.d/window",
      "1\n",
      "EINVAL",
      `Cannot set "window": window 1 needs a known limit, but test/bare has limit unknown`,
    );
    set(root, "agent/coder.d/model", "main\n"); // alias of debug/echo
    set(root, "agent/coder.d/window", "100000\n");
    assertEquals(read(root, "agent/coder.d/window"), "100000\n");
  }));

Deno.test("a 4294967295 window is accepted when the model's limit is that large", () =>
  withTree((root) => {
    Deno.writeTextFileSync(`${root}/model/debug/echo.d/limit`, "4294967295\n");
    set(root, "agent/coder.d/window", "4294967295\n");
    assertEquals(read(root, "agent/coder.d/window"), "4294967295\n");
  }));

Deno.test("changing model is rejected, atomically, when the explicit window does not fit the new model", () =>
  withTree((root) => {
    set(root, "agent/coder.d/window", "100000\n");
    rejected(
      root,
      "agent/coder.d/model",
      "test/small\n",
      "EINVAL",
      `Cannot set "model": window 100000 is larger than the limit 4096 of test/small; the explicit window is kept, so set "window" first`,
    );
    rejected(
      root,
      "agent/coder.d/model",
      "test/nolimit\n",
      "EINVAL",
      `Cannot set "model": window 100000 needs a known limit, but test/nolimit has limit unknown; the explicit window is kept, so set "window" first`,
    );
    rejected(
      root,
      "agent/coder.d/model",
      "test/missing\n",
      "ENOENT",
      `Cannot set "model": no model "test/missing"`,
    );
    rejected(
      root,
      "agent/coder.d/model",
      "nosuch\n",
      "ENOENT",
      `Cannot set "model": no model "nosuch"`,
    );
    rejected(
      root,
      "agent/coder.d/model",
      "test\n",
      "ENOENT",
      `Cannot set "model": no model "test"`,
    );
    assertEquals([read(root, "agent/coder.d/model"), read(root, "agent/coder.d/window")], [
      "debug/echo\n",
      "100000\n",
    ]);
    set(root, "agent/coder.d/window", "4096\n");
    set(root, "agent/coder.d/model", "test/small\n");
    set(root, "agent/coder.d/window", "auto\n"); // the reset
    set(root, "agent/coder.d/model", "test/nolimit\n");
    assertEquals([read(root, "agent/coder.d/model"), read(root, "agent/coder.d/window")], [
      "test/nolimit\n",
      "auto\n",
    ]);
  }));

Deno.test("with a uid, only uid 0 or the agent's owner may write, and identity stays root's", () =>
  withTree((root) => {
    rejected(
      root,
      "agent/coder.d/window",
      "4096\n",
      "EACCES",
      `Cannot set "window": uid 1001 is not the owner (1000) of agent "coder"`,
      1001,
    );
    set(root, "agent/coder.d/window", "4096\n", 1000);
    set(root, "agent/coder.d/window", "auto\n", 0);
    rejected(
      root,
      "agent/coder.d/label",
      "user_u:agent_r:coder_t:s0\n",
      "EACCES",
      `Cannot set "label": only uid 0 may set "label" of agent "coder"`,
      1000,
    );
    rejected(
      root,
      "agent/coder.d/uid",
      "0\n",
      "EACCES",
      `Cannot set "uid": uid 1000 may set "uid" only to itself, not 0`,
      1000,
    );
    set(root, "agent/coder.d/uid", "1000\n", 1000);
    rejected(
      root,
      "agent/coder.d/owner",
      "1001\n",
      "EACCES",
      `Cannot set "owner": uid 1000 may set "owner" only to itself, not 1001`,
      1000,
    );
    rejected(
      root,
      "model/debug/echo.d/cap",
      "chat\n",
      "EACCES",
      `Cannot set "cap": uid 1000 may not change model "debug/echo" (owned by root)`,
      1000,
    );
    rejected(
      root,
      "tool/fs.read.d/cap",
      "read\n",
      "EACCES",
      `Cannot set "cap": uid 1000 may not change tool "fs.read" (owned by root)`,
      1000,
    );
    Deno.removeSync(`${root}/agent/coder.d/owner`);
    rejected(
      root,
      "agent/coder.d/window",
      "auto\n",
      "EACCES",
      `Cannot set "window": agent "coder" has no valid owner; only uid 0 may change it`,
      1000,
    );
  }));

Deno.test("cross-file rules for tools and models: name matches, no self fallback", () =>
  withTree((root) => {
    rejected(
      root,
      "tool/fs.read.d/name",
      "fs.write\n",
      "EINVAL",
      `Cannot set "name": "fs.write" is not the tool's name "fs.read"`,
    );
    rejected(
      root,
      "model/debug/echo.d/fallback",
      "debug/echo\n",
      "EINVAL",
      `Cannot set "fallback": "debug/echo" cannot fall back to itself`,
    );
    set(root, "model/debug/echo.d/fallback", "# next\ntest/small\n");
    rejected(
      root,
      "model/debug/echo.d/cap",
      "openai_responses\n",
      "EINVAL",
      `Cannot set "cap": line 1: "openai_responses" is a provider-format word and is forbidden`,
    );
  }));

Deno.test("writeControl(): a system-tier control is the caller's (root's), 0644, whoever owned the old file or its dir", () =>
  withTree((root) => {
    const p = `${root}/agent/coder.d/window`;
    Deno.chmodSync(p, 0o666);
    Deno.chownSync(p, 1000, 1000);
    Deno.chownSync(`${root}/agent/coder.d`, 1000, 1001);
    set(root, "agent/coder.d/window", "4096\n", 1000);
    set(root, "agent/coder.d/approval", "ask\n");
    const own = (rel: string) => {
      const st = Deno.lstatSync(`${root}/${rel}`);
      return [st.mode! & 0o7777, st.uid, st.gid, read(root, rel)];
    };
    const me = [Deno.uid(), Deno.gid()];
    assertEquals([own("agent/coder.d/window"), own("agent/coder.d/approval")], [
      [0o644, ...me, "4096\n"],
      [0o644, ...me, "ask\n"],
    ]);
  }));

Deno.test({
  name:
    "writeControl(): a user-tier control is written as its user (mode kept), so the user's symlinks reach nothing of root's",
  ignore: Deno.uid() !== 0,
  fn: () =>
    withTree((root) => {
      const u = 1000;
      Deno.chmodSync(root, 0o755); // the user must reach its home, as in a real storage tree
      const home = `${root}/home/${u}`;
      Deno.mkdirSync(`${home}/tool/mine.d`, { recursive: true });
      Deno.writeTextFileSync(`${home}/tool/mine.d/description`, "old\n", { mode: 0o600 });
      Deno.chmodSync(`${home}/tool/mine.d/description`, 0o600);
      for (const d of [home, `${home}/tool`, `${home}/tool/mine.d`]) Deno.chownSync(d, u, u);
      Deno.chownSync(`${home}/tool/mine.d/description`, u, u);
      set(root, `home/${u}/tool/mine.d/description`, "mine\n", u); // the user through the mount
      set(root, `home/${u}/tool/mine.d/name`, "mine\n"); // root writing the user's control
      const own = (rel: string) => {
        const st = Deno.lstatSync(`${root}/${rel}`);
        return [st.mode! & 0o7777, st.uid, st.gid, read(root, rel)];
      };
      assertEquals(
        [own(`home/${u}/tool/mine.d/description`), own(`home/${u}/tool/mine.d/name`)],
        [[0o600, u, u, "mine\n"], [0o644, u, u, "mine\n"]],
      );
      // The user points its tool/ at the system tools: root writing "its" control is refused
      // (the write runs as the user), and the system tool's file is untouched.
      Deno.removeSync(`${home}/tool`, { recursive: true });
      Deno.symlinkSync("../../tool", `${home}/tool`);
      const before = read(root, "tool/fs.read.d/description");
      Deno.chmodSync(`${root}/tool/fs.read.d`, 0o755);
      const e = assertThrows(
        () => set(root, `home/${u}/tool/fs.read.d/description`, "pwned\n"),
        CtxError,
      );
      assertEquals([e.errno, read(root, "tool/fs.read.d/description")], ["EACCES", before]);
      assertEquals([...Deno.readDirSync(`${root}/tool/fs.read.d`)].length, 5); // no temp left
    }),
});

Deno.test("writeControl() waits for the directory lock, then checks the state it finds", () =>
  withTree(async (root) => {
    const dir = await Deno.open(`${root}/agent/coder.d`, { read: true });
    await dir.lock(true); // a concurrent writer of this agent holds the lock
    const url = new URL("./control.ts", import.meta.url).href;
    const code = `
      const { writeControl } = await import(${JSON.stringify(url)});
      console.log("start");
      try {
        writeControl(${
      JSON.stringify(root)
    }, "agent/coder.d/window", new TextEncoder().encode("100000\\n"));
        console.log("written");
      } catch (e) { console.log(String(e)); }`;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["eval", code],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("start\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      out += value;
    }
    try {
      // While the lock is held, the model changes to one the window would not fit.
      Deno.writeTextFileSync(`${root}/agent/coder.d/model`, "test/small\n");
    } finally {
      dir.close(); // releases the lock
    }
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out += value;
    }
    assertEquals((await child.status).code, 0);
    assertEquals(
      out,
      `start\nEINVAL: agent/coder.d/window: Cannot set "window": window 100000 is larger than the limit 4096 of test/small\n`,
    );
    assertEquals(read(root, "agent/coder.d/window"), "auto\n");
  }));
