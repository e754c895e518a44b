/** The symlink-swap race, run for real: a user's backing-tree symlink never leads the root daemon out of the tree. */
import { assert, assertEquals } from "../assert.ts";
import { cleanup, type Daemon, makeTree, run, sh, startDaemon } from "../fixture/mod.ts";

const here = new URL(".", import.meta.url).pathname;
const UID = 1000;
/** Seconds each race runs; on the unfixed daemon the first leak came within the first second. */
const SECONDS = Number(Deno.env.get("CORTEXFS_RACE_SECONDS") ?? 4);
const MARKER = "TOPSECRET-6b1f";

/** Everything about a directory that an escaped root operation could change. */
function snapshot(dir: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const st = Deno.lstatSync(dir);
  out["."] = { mode: st.mode, uid: st.uid, gid: st.gid };
  for (const e of Deno.readDirSync(dir)) {
    const s = Deno.lstatSync(`${dir}/${e.name}`);
    out[e.name] = {
      mode: s.mode,
      uid: s.uid,
      gid: s.gid,
      size: s.size,
      mtime: s.mtime?.getTime(),
      bytes: s.isFile ? Deno.readTextFileSync(`${dir}/${e.name}`) : null,
    };
  }
  return out;
}

/** Runs the probe as `uid` (setpriv, no supplementary groups); returns its JSON line. */
async function probe(bin: string, args: string[]): Promise<Record<string, number>> {
  const out = await run([bin, ...args], { uid: UID });
  assertEquals(out.code, 0, out.stderr);
  return JSON.parse(out.stdout);
}

Deno.test(`symlink race (${SECONDS} s): a uid-${UID} client through the mount while the backing d flips to a symlink into a root-only dir: nothing read, made or changed there`, async () => {
  const tree = await makeTree();
  const secret = await Deno.makeTempDir({ prefix: "cortexfs-secret-" }); // 0700 root
  let d: Daemon | null = null;
  try {
    Deno.writeTextFileSync(`${secret}/shadow`, `${MARKER}\n`, { mode: 0o600 });
    Deno.writeTextFileSync(`${secret}/victim`, "root's file\n", { mode: 0o644 });
    Deno.chmodSync(`${secret}/victim`, 0o644);
    const before = snapshot(secret);

    // An agent home of uid 1000, as a sandbox sees it: the backing directory, writable by the
    // agent (the test opens the path to it instead of a bind mount).
    const a = `${tree.root}/home/${UID}/agent/a`;
    Deno.mkdirSync(`${a}/d`, { recursive: true });
    for (const p of [`home/${UID}`, `home/${UID}/agent`, `home/${UID}/agent/a`]) {
      Deno.chownSync(`${tree.root}/${p}`, UID, UID);
    }
    for (const p of [tree.storage, `${tree.storage}/generations`, tree.root, `${tree.root}/home`]) {
      Deno.chmodSync(p, Deno.statSync(p).mode! & 0o7777 | 0o011);
    }
    Deno.writeTextFileSync(`${a}/d/shadow`, "mine\n");
    Deno.writeTextFileSync(`${a}/d/victim`, "");
    Deno.writeTextFileSync(`${a}/d/ren1`, "");
    for (const e of ["d", "d/shadow", "d/victim", "d/ren1"]) Deno.chownSync(`${a}/${e}`, UID, UID);

    const bin = `${tree.dir}/race_probe`;
    const cc = await sh(`gcc -O2 -o ${bin} ${here}race_probe.c`);
    assertEquals(cc.code, 0, cc.stderr);

    d = await startDaemon(tree);
    const [client, swapper] = await Promise.all([
      probe(bin, ["client", `${tree.mount}/home/${UID}/agent/a`, String(SECONDS), MARKER]),
      probe(bin, ["swap", a, String(SECONDS), secret]),
    ]);
    console.log(JSON.stringify({ client, swapper }));

    // The race really ran: the swapper flipped d many times, and the client worked on its own
    // files through the mount in between.
    assert(swapper.swaps > 1000, `only ${swapper.swaps} swaps`);
    assert(client.iterations > 100, `only ${client.iterations} client iterations`);
    assert(
      client.reads_mine > 10,
      `the client read its own d/shadow only ${client.reads_mine} times`,
    );
    // ...and never reached the root-only directory.
    assertEquals(client.leaks, 0);
    assertEquals(snapshot(secret), before);
  } finally {
    await cleanup(tree, d);
    await Deno.remove(secret, { recursive: true }).catch(() => {});
  }
});

/** Runs `script` in bash as uid/gid 1000 with exactly `groups`; returns code and output. */
async function asUid(script: string, groups: number[]): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command("setpriv", {
    args: [
      `--reuid=${UID}`,
      `--regid=${UID}`,
      groups.length ? `--groups=${groups.join(",")}` : "--clear-groups",
      "bash",
      "-c",
      script,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test("through the mount a final symlink is still a symlink (ln -s, readlink, stat, mv, rm); what a user makes is theirs; a group grants what it grants", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    const home = `${tree.root}/home/${UID}`;
    Deno.mkdirSync(`${home}/team`, { recursive: true });
    Deno.chownSync(home, UID, UID);
    Deno.chownSync(`${home}/team`, 0, 4242); // root's, writable by group 4242 only
    Deno.chmodSync(`${home}/team`, 0o775);
    d = await startDaemon(tree);
    const m = `${tree.mount}/home/${UID}`;
    const links = await asUid(
      `cd ${m} && ln -s /etc/hostname l && readlink l && stat -c '%F %u' l && mv l l2 &&
       readlink l2 && rm l2 && ls -A | grep -c '^l' ; true`,
      [],
    );
    assertEquals(links, {
      code: 0,
      out: "/etc/hostname\nsymbolic link 1000\n/etc/hostname\n0\n",
    });
    const made = await asUid(
      `cd ${m} && mkdir -p x/y && touch x/y/f && ln -s f x/y/s && mkfifo x/p &&
       stat -c '%n %u:%g %a' x x/y/f x/p && stat -c '%n %u' x/y/s`,
      [],
    );
    assertEquals(made, {
      code: 0,
      out: "x 1000:1000 755\nx/y/f 1000:1000 644\nx/p 1000:1000 644\nx/y/s 1000\n",
    });
    // the group's member may create in team/ (the retry with its groups), a non-member may not
    const member = await asUid(`touch ${m}/team/a && stat -c '%u:%g' ${m}/team/a`, [4242]);
    assertEquals(member, { code: 0, out: "1000:1000\n" });
    const other = await asUid(`touch ${m}/team/b 2>/dev/null; echo $?`, []);
    assertEquals(other, { code: 0, out: "1\n" });
    assertEquals([...Deno.readDirSync(`${home}/team`)].map((e) => e.name), ["a"]);
  } finally {
    await cleanup(tree, d);
  }
});
