/** A model's `limit` through a real mount: host providers.d config, then the stored file, then the catalog, then `unknown`; read-only for everyone. */
import { assert, assertEquals } from "../assert.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { modelEntry } from "../../src/store/tree.ts";
import { cleanup, ctxRun, type Daemon, makeTree, sh, startDaemon } from "../fixture/mod.ts";

/** Writes model `ref` into the tree at `root` with `driver` (and `id`), no `limit` file. */
function model(root: string, ref: string, o: { driver: string; id?: string }): void {
  const d = `${root}/model/${ref}.d`;
  Deno.mkdirSync(d, { recursive: true });
  replaceFile(`${d}/driver`, `agent=${o.driver}\ndefault=${o.driver}\n`);
  if (o.id) replaceFile(`${d}/id`, `${o.id}\n`);
  replaceFile(`${root}/model/${ref}`, modelEntry(ref, { limit: "unknown", now: 0 }), {
    mode: 0o555,
  });
}

Deno.test("limit: providers.d, then the stored file, then the catalog, then unknown; listed, 0444, EROFS; bad files named in the log and skipped", async () => {
  const tree = await makeTree();
  const providers = `${tree.dir}/providers.d`;
  Deno.mkdirSync(providers);
  const put = (name: string, v: unknown) =>
    Deno.writeTextFileSync(`${providers}/${name}`, typeof v === "string" ? v : JSON.stringify(v));
  // above the stored limit 131072 of debug/echo: so small that no run fits
  put("debug.json", { name: "debug", models: ["echo"], model_limits: { echo: 200 } });
  // keyed by the native id (`id` control), not the path component
  put("local.json", {
    base_url: "http://127.0.0.1:9/v1",
    models: ["llama3.1:8b"],
    model_limits: { "llama3.1:8b": 32768 },
  });
  // disabled: the catalog's 128000 stays
  put("openai.json", { enabled: false, models: ["gpt-4o"], model_limits: { "gpt-4o": 1000 } });
  // bad: a limit of 0; the whole file is ignored (odd/thing is then unknown)
  put("odd.json", { models: ["thing"], model_limits: { thing: 0 } });
  put("notes.txt", "not a provider file\n");
  model(tree.root, "openai/gpt-4o", { driver: "openai-responses" });
  model(tree.root, "local/llama", { driver: "openai-chat", id: "llama3.1:8b" });
  model(tree.root, "odd/thing", { driver: "openai-chat" });
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree, { wrap: ["env", `CORTEXFS_PROVIDERS=${providers}`] });
    const m = `${tree.mount}/model`;
    const read = (ref: string) => Deno.readTextFileSync(`${m}/${ref}.d/limit`);
    assertEquals(
      ["debug/echo", "debug/script", "openai/gpt-4o", "local/llama", "odd/thing"].map(read),
      ["200\n", "131072\n", "128000\n", "32768\n", "unknown\n"],
    );
    // the entry's metadata says the same (stored with context_length=unknown or 131072)
    for (const [ref, want] of [["openai/gpt-4o", 128000], ["debug/echo", 200]] as const) {
      const entry = Deno.readTextFileSync(`${m}/${ref}`);
      const line = entry.split("\n").find((l) => l.startsWith("context_length="));
      assertEquals([ref, line, Deno.statSync(`${m}/${ref}`).size], [
        ref,
        `context_length=${want}`,
        new TextEncoder().encode(entry).length,
      ]);
    }
    // listed whether or not a file is stored, read-only, root's
    const names = [...Deno.readDirSync(`${m}/openai/gpt-4o.d`)].map((e) => e.name).sort();
    assertEquals(names, ["driver", "limit"]);
    const st = Deno.statSync(`${m}/openai/gpt-4o.d/limit`);
    assertEquals([st.mode! & 0o7777, st.uid, st.size], [0o444, 0, 7]);
    for (const ref of ["openai/gpt-4o", "debug/echo"]) {
      const w = await sh(`echo 5 > ${m}/${ref}.d/limit`);
      assertEquals([ref, w.code, /Read-only file system/.test(w.stderr)], [ref, 1, true]);
    }
    const lim = `${m}/openai/gpt-4o.d/limit`;
    const tries = await sh(
      `for c in 'truncate -s 0 ${lim}' 'rm -f ${lim}' 'chmod 644 ${lim}' 'touch ${lim}' ` +
        `'cp ${lim} ${m}/openai/gpt-4o.d/.limit.tmp-1-ab'; do $c 2>/dev/null; echo "\${c%% *}=$?"; done; ` +
        `mv ${m}/openai/gpt-4o.d/.limit.tmp-1-ab ${lim} 2>&1; echo "mv=$?"`,
    );
    assertEquals(
      tries.stdout.replace(/mv: .*\n/, ""),
      "truncate=1\nrm=1\nchmod=1\ntouch=1\ncp=0\nmv=1\n",
    );
    assert(/Read-only file system/.test(tries.stdout), tries.stdout);
    assertEquals(read("openai/gpt-4o"), "128000\n");
    // no file appeared behind the mount
    assertEquals(
      [...Deno.readDirSync(`${tree.root}/model/openai/gpt-4o.d`)].map((e) => e.name),
      ["driver"],
    );
    // the host limit is the one runs use (coder is on debug/echo, window auto: its instance read
    // providers.d itself) ...
    const run = await ctxRun(["agent", "send", "coder", "hi"], { env: { CTX_ROOT: tree.mount } });
    assertEquals(run.code, 2, JSON.stringify(run)); // E2BIG
    assert(
      run.stderr.includes("but the window of 200 tokens of debug/echo admits 600 bytes"),
      run.stderr,
    );
    // ... and write checks use
    const win = `${tree.mount}/agent/coder.d/window`;
    assertEquals((await sh(`echo 201 > ${win}`)).code, 1);
    assertEquals((await sh(`echo 200 > ${win}`)).code, 0);
    assertEquals(Deno.readTextFileSync(win), "200\n");
    // a model that does not exist has no limit
    assertEquals((await sh(`cat ${m}/odd/none.d/limit`)).code, 1);
    const log = d.log();
    assert(
      log.includes(
        `cortexfsd: ${providers}/odd.json ignored: "odd.json": "model_limits" "thing": 0 is not ` +
          "a token count 1..4294967295\n",
      ),
      log,
    );
    assert(!log.includes("notes.txt"), log);
    assert(!log.includes("local.json") && !log.includes("debug.json"), log);
  } finally {
    await cleanup(tree, d);
  }
});
