/** The checked executable is the one that runs: a loop swapping a symlink over a user tool never gets its target run. */
import { assert, assertEquals } from "../assert.ts";
import { runTool } from "../../src/tool/exec.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { addTool, cleanup, grant, toolTree } from "../fixture/mod.ts";

/**
 * Starts a separate process that, as fast as it can, renames a hard link of `good` and then a
 * symlink to `bad` over `<dir>/swp`, so the name flips between a checked-good regular file and
 * a symlink. Returns a stop function.
 */
function swapper(dir: string): { stop: () => Promise<number> } {
  const script = `
    const d = ${JSON.stringify(dir)};
    let n = 0;
    for (;;) {
      try { Deno.removeSync(d + "/a.tmp"); } catch {}
      try { Deno.removeSync(d + "/b.tmp"); } catch {}
      Deno.linkSync(d + "/good", d + "/a.tmp");
      Deno.renameSync(d + "/a.tmp", d + "/swp");
      Deno.symlinkSync("bad", d + "/b.tmp");
      Deno.renameSync(d + "/b.tmp", d + "/swp");
      if (++n % 64 === 0) await new Promise((r) => setTimeout(r, 0));
    }`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "null",
    stderr: "null",
  }).spawn();
  return {
    async stop() {
      child.kill("SIGKILL");
      return (await child.status).code;
    },
  };
}

/** A user-tier tool `swp` (plus its `.d/`), a `good` twin and a `bad` target that leaves a marker. */
function setup(root: string, marker: string): string {
  const dir = `${root}/home/0/tool`;
  addTool(root, "swp", "#!/bin/sh\necho GOOD\n", dir);
  Deno.writeTextFileSync(`${dir}/good`, "#!/bin/sh\necho GOOD\n", { mode: 0o755 });
  Deno.writeTextFileSync(`${dir}/bad`, `#!/bin/sh\necho BAD; touch ${marker}\n`, { mode: 0o755 });
  Deno.chmodSync(`${dir}/good`, 0o755);
  Deno.chmodSync(`${dir}/bad`, 0o755);
  return dir;
}

Deno.test("tsh execs the inode it checked: 400 runs against a symlink-swap loop never run the target", async () => {
  const f = await toolTree();
  const marker = `${f.ws}/bad-ran`;
  const dir = setup(f.root, marker);
  grant(f, "allow coder_t tool:swp execute\n");
  const ctx = {
    root: f.root,
    agent: "coder",
    uid: 0,
    ctxPath: ["/ctx/home/0/tool"],
    env: { PATH: "/usr/bin:/bin" },
    limit: 4096,
  };
  const loop = swapper(dir);
  const seen: Record<string, number> = {};
  try {
    for (let i = 0; i < 400; i++) {
      const r = await runTool("swp", [], ctx);
      const key = r.status === "ok"
        ? r.content.trim()
        : `${r.errno}: ${r.content.split(": ").pop()?.trim()}`;
      seen[key] = (seen[key] ?? 0) + 1;
    }
  } finally {
    await loop.stop();
  }
  try {
    assertEquals(seen["BAD"], undefined, JSON.stringify(seen));
    assertEquals(Deno.readDirSync(f.ws).some((e) => e.name === "bad-ran"), false);
    // The loop really raced the runs: both the good file and refusals were seen.
    assert((seen["GOOD"] ?? 0) > 0, JSON.stringify(seen));
    assert(Object.keys(seen).some((k) => k.startsWith("EACCES")), JSON.stringify(seen));
  } finally {
    await cleanup(f);
  }
});

Deno.test("in the sandbox under the same swap loop, only the checked file runs", async () => {
  const f = await toolTree();
  const marker = `${f.ws}/bad-ran`;
  const dir = setup(f.root, marker);
  grant(f, "allow coder_t tool:swp execute\n");
  const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
  const loop = swapper(dir);
  const seen: string[] = [];
  try {
    for (let i = 0; i < 30; i++) {
      const r = await runTsh(["swp"], o);
      seen.push(r.status === "ok" ? r.content.trim() : String(r.errno));
    }
  } finally {
    await loop.stop();
  }
  try {
    // Refusals only (ELOOP: the host-side check runs with --allow-all, where O_NOFOLLOW holds;
    // ENOENT: tsh's own resolution found no executable regular file under the name at that instant).
    assertEquals(seen.filter((s) => !["GOOD", "EACCES", "ELOOP", "ENOENT"].includes(s)), []);
    assertEquals(Deno.readDirSync(f.ws).some((e) => e.name === "bad-ran"), false);
  } finally {
    await cleanup(f);
  }
});

Deno.test({
  name: "exec through the held descriptor works for an agent running as uid 1000 (no capabilities)",
  ignore: Deno.uid() !== 0, // needs root to run as another uid; CI runs as root
  async fn() {
    const f = await toolTree();
    try {
      f.set("uid", "1000\n");
      f.set("gid", "1000\n");
      f.set("path", "/ctx/tool\n/ctx/home/1000/tool\n");
      addTool(f.root, "whoami2", '#!/bin/sh\nid -u; echo "$0"\n', `${f.root}/home/1000/tool`);
      grant(f, "allow coder_t tool:whoami2 execute\n");
      const r = await runTsh(["whoami2"], {
        root: f.root,
        agent: "coder",
        uid: 1000,
        workspace: f.ws,
      });
      // The script's $0 is the descriptor path tsh exec'd (documented in spec/tool-policy.md).
      assertEquals({ ...r, content: r.content.replace(/\/proc\/\d+\/fd\/\d+/, "/proc/PID/fd/N") }, {
        name: "whoami2",
        status: "ok",
        exitCode: 0,
        content: "1000\n/proc/PID/fd/N\n",
        truncated: false,
      });
    } finally {
      await cleanup(f);
    }
  },
});
