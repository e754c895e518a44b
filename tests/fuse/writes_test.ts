/** Control writes commit whole or not at all, per open file description: real tools and a C client on a real mount. */
import { assertEquals, assertMatch } from "../assert.ts";
import { cleanup, type Daemon, makeTree, sh, startDaemon } from "../fixture/mod.ts";

const here = new URL(".", import.meta.url).pathname;
const read = (p: string) => Deno.readTextFileSync(p);
const L1 = "allow coder_t tool:fs.read execute\n";
const L2 = "allow coder_t tool:bash execute\n";

/** Runs each `[script, exit code, bytes of control afterwards]`, checking the mount and the backing file. */
async function steps(
  tree: { mount: string; root: string },
  control: string,
  cases: [string, number, string][],
): Promise<string[]> {
  const stderr: string[] = [];
  for (const [script, code, after] of cases) {
    const r = await sh(script);
    assertEquals(
      [script, r.code, read(`${tree.mount}/${control}`), read(`${tree.root}/${control}`)],
      [script, code, after, after],
      r.stderr,
    );
    stderr.push(r.stderr);
  }
  return stderr;
}

Deno.test("a failed write commits nothing: the reviewer's reproductions, and a spoiled handle stays spoiled", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const dir = `${tree.mount}/agent/coder.d`;
    const w = `${dir}/window`, s = `${dir}/system.md`, p = `${dir}/policy`;
    const e1 = await steps(tree, "agent/coder.d/window", [
      [`echo 4096 > ${w}`, 0, "4096\n"],
      // bash's printf makes two writes: "100\n" (valid alone) and "\n" (EINVAL): nothing lands
      [`printf '100\\n\\n' > ${w}`, 1, "4096\n"],
      [`: > ${w}`, 0, "4096\n"], // an empty window is invalid; the shell ignores close(2)'s EINVAL
    ]);
    assertMatch(e1[1], /printf: write error: Invalid argument/);
    const system = read(s);
    const e2 = await steps(tree, "agent/coder.d/system.md", [
      // tr writes 64 KiB (valid alone), then crosses the limit: EMSGSIZE, nothing lands
      [`head -c 70000 /dev/zero | tr '\\0' a > ${s}`, 1, system],
      [`head -c 65536 /dev/zero | tr '\\0' a > ${s}`, 0, "a".repeat(65536)], // exactly the limit
      [`printf %s '${system.trimEnd()}\n' > ${s}`, 0, system],
    ]);
    assertMatch(e2[0], /tr: write error: Message too long/);
    const policy = read(p);
    const e3 = await steps(tree, "agent/coder.d/policy", [
      // bash closes the opened fd right after dup2 (a FLUSH of the empty O_TRUNC content): no commit
      [`echo garbage > ${p}`, 1, policy],
      [`{ printf '${L1}'; printf 'garbage\\n'; } > ${p}`, 1, policy],
      // the first write spoils the handle: the valid second one fails too, and nothing lands
      [`{ printf 'garbage\\n'; printf '${L1}'; } > ${p}`, 1, policy],
      [`echo 'garbage line' >> ${p}`, 1, policy],
    ]);
    assertEquals(e3[2].match(/printf: write error: Invalid argument/g)?.length, 2, e3[2]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("several writes that together form a valid value commit whole; a reader meanwhile sees the old bytes", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const p = `${tree.mount}/agent/coder.d/policy`;
    const seen = (n: number) => `${tree.dir}/seen${n}`;
    const policy = read(p);
    await steps(tree, "agent/coder.d/policy", [
      // two builtin writes through one redirection; `cat` runs in between (its exit closes a copy
      // of the descriptor: a FLUSH from another process, which commits nothing)
      [
        `{ printf '${L1}'; cat ${p} > ${seen(1)}; printf '${L2}'; cat ${p} > ${seen(2)}; } > ${p}`,
        0,
        L1 + L2,
      ],
      // the same with forked writers: the first one's exit does not commit half a policy
      [`{ env printf '${L2}'; cat ${p} > ${seen(3)}; env printf '${L1}'; } > ${p}`, 0, L2 + L1],
      // O_APPEND in two writes with a stat between them (which reports the committed size)
      [
        `{ printf 'allow coder_t tool:fs.list execute\\n'; stat ${p} >/dev/null; ` +
        `printf 'allow coder_t tool:fs.stat execute\\n'; } >> ${p}`,
        0,
        L2 + L1 + "allow coder_t tool:fs.list execute\nallow coder_t tool:fs.stat execute\n",
      ],
      [`: > ${p}`, 0, ""], // O_TRUNC alone: committed when the open file is released
      [`printf '${L1}' > ${p}`, 0, L1],
    ]);
    assertEquals([read(seen(1)), read(seen(2)), read(seen(3))], [policy, policy, L1 + L2]);
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("one process's syscalls: pending mid-line writes, dup'd descriptors, close(2) errnos, mmap refused", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  const probe = `${tree.dir}/probe`;
  try {
    const cc = await sh(`gcc -O2 -o ${probe} ${here}write_probe.c`);
    assertEquals([cc.code, cc.stderr], [0, ""]);
    d = await startDaemon(tree);
    const p = `${tree.mount}/agent/coder.d/policy`;
    const bar = (s: string) => s.replaceAll("\n", "|");
    const run = async (...args: string[]) => {
      const q = args.map((a) => `'${a}'`).join(" ");
      const r = await sh(`${probe} ${p} ${q}`);
      assertEquals([r.code, r.stderr], [0, ""]);
      return r.stdout.trimEnd().split("\n");
    };
    assertEquals((await sh(`printf '${L1}' > ${p}`)).code, 0);
    const half = "allow coder_t to", rest = L2.slice(half.length);
    // a chunk ending mid-line is not judged; a reader sees the committed bytes until close
    assertEquals(await run("t", `w:${L1}`, `w:${half}`, "r", `w:${rest}`, "c", "r"), [
      "t=0",
      `w=${L1.length}`,
      `w=${half.length}`,
      `r=${bar(L1)}`,
      `w=${rest.length}`,
      "c=0",
      `r=${bar(L1 + L2)}`,
    ]);
    // content still mid-line at close: close(2) reports EINVAL and nothing lands
    assertEquals(await run("t", `w:${L2}`, `w:${half}`, "c", "r"), [
      "t=0",
      `w=${L2.length}`,
      `w=${half.length}`,
      "c=-1 EINVAL",
      `r=${bar(L1 + L2)}`,
    ]);
    // a spoiled handle: every later write and the close answer the first errno
    assertEquals(await run("t", "w:garbage\n", `w:${L1}`, "c", "r"), [
      "t=0",
      "w=-1 EINVAL",
      "w=-1 EINVAL",
      "c=-1 EINVAL",
      `r=${bar(L1 + L2)}`,
    ]);
    // dup'd descriptors: each close by the writing process commits the whole buffer so far
    assertEquals(await run("t", `w:${L2}`, "d", "c", "r", `w:${L1}`, "c", "r"), [
      "t=0",
      `w=${L2.length}`,
      "d=0",
      "c=0",
      `r=${bar(L2)}`,
      `w=${L1.length}`,
      "c=0",
      `r=${bar(L2 + L1)}`,
    ]);
    // a control is served with direct_io: a shared mapping is refused (ENODEV), nothing changes
    assertEquals(await run("o", "m", "c", "r"), ["o=0", "m=-1 ENODEV", "c=0", `r=${bar(L2 + L1)}`]);
    assertEquals(read(`${tree.root}/agent/coder.d/policy`), L2 + L1);
  } finally {
    await cleanup(tree, d);
  }
});
