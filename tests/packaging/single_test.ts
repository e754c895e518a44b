/** The single downloadable file, alone on a "fresh machine": no checkout, no deno, no network. */
import { assertEquals } from "../assert.ts";
import { VERSION } from "../../src/abi/version.ts";
import { run, run as exec } from "../fixture/mod.ts";
import { builtFile, clean, fresh, inside, NAME, start } from "./fresh.ts";
import { ignore } from "../../src/abi/errno.ts";

const root = Deno.uid() === 0;

/** The payload hash the header names (its cache directory). */
function hashOf(file: string): string {
  const head = new TextDecoder().decode(Deno.readFileSync(file).subarray(0, 8192));
  const m = head.match(/^hash=([0-9a-f]{64})$/m);
  if (!m) throw new Error("no hash= line in the header");
  return m[1];
}

/** An empty dir with only the built file copied in, an empty HOME and an empty /var/cache beside it. */
async function lone(): Promise<{ dir: string; file: string; home: string; varCache: string }> {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-fresh-" });
  Deno.chmodSync(dir, 0o755); // other uids run the file too
  const file = `${dir}/${NAME}`;
  Deno.copyFileSync(await builtFile(), file);
  Deno.chmodSync(file, 0o755);
  Deno.mkdirSync(`${dir}/home`);
  Deno.mkdirSync(`${dir}/var-cache`);
  return { dir, file, home: `${dir}/home`, varCache: `${dir}/var-cache` };
}

/** An unprivileged uid with no passwd entry (setpriv needs none). */
const NOBODY = ["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups"];

function names(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return [];
  }
}

/**
 * A terminal gone early, in its own words: whether its pid lives, its unit log, the agent's host
 * log (when the host saw it exit) and each recording's last records (`process.exit`, its reason).
 */
function whyGone(run: string, state: string, pid: number): string {
  const read = (p: string) => {
    try {
      return Deno.readTextFileSync(p);
    } catch (e) {
      ignore(e, Deno.errors.NotFound);
      return "(none)\n";
    }
  };
  const found: string[] = [];
  const walk = (d: string) => {
    for (const e of names(d)) {
      const p = `${d}/${e}`;
      if (e === "events.jsonl" || e === "meta.json") found.push(p);
      else if (Deno.lstatSync(p).isDirectory) walk(p);
    }
  };
  walk(`${state}/storage`);
  const live = read(`/proc/${pid}/cmdline`).replaceAll("\0", " ").slice(0, 200);
  return [
    `\n--- terminal pid ${pid} now: ${live}\n`,
    `--- ${run}/terminal/mine/default.log\n${read(`${run}/terminal/mine/default.log`)}`,
    `--- ${run}/log/mine.log (tail)\n${
      read(`${run}/log/mine.log`).split("\n").slice(-12).join("\n")
    }\n`,
    ...found.map((p) => `--- ${p}\n${read(p).split("\n").slice(-6).join("\n")}\n`),
  ].join("");
}

Deno.test({
  name:
    "the single file alone (env -i, empty HOME, checkout, deno and Deno's cache hidden, no network) runs ctx --version, cortexfsd, an agent and a message",
  ignore: !root, // needs root: mount and network namespaces, and mounting FUSE
  async fn() {
    const { dir, file, home, varCache } = await lone();
    const hash = hashOf(file);
    const ns = fresh({ binds: [[varCache, "/var/cache"]] });
    try {
      // First run as root: unpacked into /var/cache/cortexfs/<payload hash>, readable by all
      // (the sandboxes of every user's agents bind the runtime from there).
      const v = await run([...ns, ...clean(home), file, "ctx", "--version"], { cwd: dir });
      assertEquals(v, { code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" });
      const base = `${varCache}/cortexfs`;
      assertEquals(names(base), [hash]);
      assertEquals((Deno.statSync(base).mode ?? 0) & 0o777, 0o755);
      assertEquals(Deno.readTextFileSync(`${base}/${hash}/.sha256`), `${hash}\n`);
      assertEquals(names(`${home}/.cache`).includes("cortexfs"), false); // deno's own cache only
      // An ordinary user reuses that unpack: nothing in its own cache.
      Deno.mkdirSync(`${dir}/user`);
      Deno.chownSync(`${dir}/user`, 65533, 65533);
      const user = await run([...ns, ...NOBODY, ...clean(`${dir}/user`), file, "ctx", "-V"]);
      assertEquals([user, names(`${dir}/user/.cache`).includes("cortexfs")], [
        { code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" },
        false,
      ]);
      // Multi-call: the file's own name is cortexfs; a symlink named after a program runs it.
      Deno.symlinkSync(file, `${dir}/ctx`);
      const viaLink = await run([...ns, ...clean(home), `${dir}/ctx`, "-V"], { cwd: dir });
      const self = await run([...ns, ...clean(home), file, "--version"], { cwd: dir });
      assertEquals([viaLink, self], [
        { code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" },
        { code: 0, stdout: `cortexfs ${VERSION}\n`, stderr: "" },
      ]);

      // The daemon, its state where the flags say (storage built on this first run).
      const st = `${dir}/state/storage`, mnt = `${dir}/state/ctx`, rn = `${dir}/state/run`;
      const d = start(
        [
          ...ns,
          ...clean(home),
          file,
          "cortexfsd",
          "--storage",
          st,
          "--mount",
          mnt,
          "--run",
          rn,
        ],
        { cwd: dir },
      );
      try {
        await d.waitFor("cortexfsd: serving generation");
        const ctx = (args: string[]) =>
          run([
            ...inside(d.child.pid, dir),
            ...clean(home, { CTX_ROOT: mnt }),
            file,
            "ctx",
            ...args,
          ]);
        assertEquals(await ctx(["agent", "new", "mine"]), {
          code: 0,
          stdout: "agent/mine\n",
          stderr: "",
        });
        // The default embedded model (debug/echo) answers with the message.
        assertEquals(await ctx(["agent", "send", "mine", "hello from a fresh machine"]), {
          code: 0,
          stdout: "hello from a fresh machine\n",
          stderr: "",
        });
        // ctx agent start: the host starts the session's terminal from the file's own ctxterm
        // bundle (programArgv), sandboxed tsh in this directory; stop ends it by its receipt.
        const started = await ctx(["agent", "start", "mine"]);
        assertEquals(started.code, 0, started.stderr);
        const term = /^terminal id=(\S+) session=default pid=(\d+) state=running /m.exec(
          started.stdout,
        );
        assertEquals(term !== null, true, started.stdout);
        const stopped = await ctx(["agent", "stop", "mine"]);
        const ended = stopped.stdout.startsWith(
          `stopped terminal id=${term?.[1]} session=default pid=${term?.[2]} (exited)\n`,
        );
        assertEquals(
          [stopped.code, ended],
          [0, true],
          stopped.stdout + stopped.stderr +
            (ended ? "" : whyGone(rn, `${dir}/state`, Number(term?.[2]))),
        );
        // /ctx/bin launchers exec the built file: no checkout behind them.
        const q = `'${file}'`;
        assertEquals(
          await run([...inside(d.child.pid), "cat", `${mnt}/bin/ctx`, `${mnt}/bin/tsh`]),
          {
            code: 0,
            stdout: `#!/bin/sh\nexec ${q} ctx "$@"\n#!/bin/sh\nexec ${q} tsh "$@"\n`,
            stderr: "",
          },
        );
        assertEquals(
          await run([...inside(d.child.pid), ...clean(home), `${mnt}/bin/ctx`, "--version"]),
          { code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" },
        );
      } finally {
        assertEquals(await d.stop(), 0, d.log());
      }
      assertEquals(d.log().trimEnd().split("\n").at(-1), "cortexfsd: unmounted; exiting");
      assertEquals(d.log().includes("warning"), false, d.log()); // reachable by every user
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("the single file refuses a user cache it cannot trust and a damaged payload, and two first runs share one unpack", async () => {
  const { dir, file, home, varCache } = await lone();
  const hash = hashOf(file);
  // As root: run as an unprivileged uid, in a namespace whose /var/cache is empty (no shared
  // unpack of root's to reuse). Otherwise: as this user, as it is.
  const as = root ? [...fresh({ binds: [[varCache, "/var/cache"]] }), ...NOBODY] : [];
  const ctx = (h: string, f = file) =>
    run([...as, ...clean(h), f, "ctx", "--version"], { cwd: dir });
  const homes = ["open", "theirs", "link", "half", "damaged", "two"].map((n) => {
    Deno.mkdirSync(`${home}/${n}/.cache`, { recursive: true });
    return `${home}/${n}`;
  });
  const [open, theirs, link, half, damaged, two] = homes;
  try {
    // Group- or world-writable: someone else could swap the unpack.
    Deno.mkdirSync(`${open}/.cache/cortexfs`, { mode: 0o777 });
    Deno.chmodSync(`${open}/.cache/cortexfs`, 0o777);
    // A symlink (to a directory elsewhere) is refused too.
    Deno.mkdirSync(`${link}/elsewhere`, { mode: 0o700 });
    Deno.symlinkSync(`${link}/elsewhere`, `${link}/.cache/cortexfs`);
    // Something at the hash's name that is not a checked unpack is left alone and named.
    Deno.mkdirSync(`${half}/.cache/cortexfs/${hash}`, { recursive: true, mode: 0o700 });
    Deno.chmodSync(`${half}/.cache/cortexfs`, 0o700);
    if (root) {
      for (const h of homes) {
        for (const p of [h, `${h}/.cache`, `${h}/elsewhere`, `${h}/.cache/cortexfs`]) {
          try {
            Deno.chownSync(p, 65533, 65533);
          } catch (e) {
            ignore(e, Deno.errors.NotFound); /* not in this home */
          }
        }
      }
      Deno.chownSync(`${half}/.cache/cortexfs/${hash}`, 65533, 65533);
      // Owned by another user: pre-created by it.
      Deno.mkdirSync(`${theirs}/.cache/cortexfs`, { mode: 0o755 });
      Deno.chownSync(`${theirs}/.cache/cortexfs`, 65534, 65534);
    }
    const refuse = (base: string) => ({
      code: 69,
      stdout: "",
      stderr: `cortexfs: refusing the cache directory ${base}: it must be a directory (not a ` +
        "symlink) owned by you (or root) that nobody else may write\n",
    });
    assertEquals(await ctx(open), refuse(`${open}/.cache/cortexfs`));
    assertEquals(await ctx(link), refuse(`${link}/.cache/cortexfs`));
    assertEquals(names(`${link}/elsewhere`), []);
    if (root) assertEquals(await ctx(theirs), refuse(`${theirs}/.cache/cortexfs`));
    assertEquals(await ctx(half), {
      code: 69,
      stdout: "",
      stderr: `cortexfs: ${half}/.cache/cortexfs/${hash} is not a checked unpack of this file ` +
        "owned by you (or root): remove it and run again\n",
    });
    // One changed byte of the payload: refused before anything is unpacked, nothing left behind.
    const bad = `${dir}/damaged-${NAME}`;
    const bytes = Deno.readFileSync(file);
    bytes[bytes.length - 100] ^= 0xff;
    Deno.writeFileSync(bad, bytes, { mode: 0o755 });
    Deno.chmodSync(bad, 0o755);
    const dmg = await ctx(damaged, bad);
    assertEquals(
      { code: dmg.code, stdout: dmg.stdout, left: names(`${damaged}/.cache/cortexfs`) },
      { code: 65, stdout: "", left: [] },
    );
    assertEquals(dmg.stderr.includes(`${bad} is damaged: its payload's SHA-256 is `), true);
    // Two first runs at once: both work, one unpack (0700: this user's own), no temp dir left.
    const both = await Promise.all([ctx(two), ctx(two)]);
    assertEquals(both, [0, 1].map(() => ({ code: 0, stdout: `ctx ${VERSION}\n`, stderr: "" })));
    assertEquals(names(`${two}/.cache/cortexfs`), [hash]);
    assertEquals((Deno.statSync(`${two}/.cache/cortexfs`).mode ?? 0) & 0o777, 0o700);
    assertEquals(names(varCache), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "as root the single file refuses a cache path whose ancestor another user owns or may write (it could swap the unpack before the exec); under a sticky directory it unpacks and runs",
  ignore: !root,
  async fn() {
    const { dir, file, home } = await lone();
    const hash = hashOf(file);
    const ctx = (cache: string) =>
      run([...clean(home, { CORTEXFS_CACHE: cache }), file, "ctx", "--version"], { cwd: dir });
    const refuse = (base: string) => ({
      code: 69,
      stdout: "",
      stderr: `cortexfs: refusing the cache directory ${base}: a directory above it is not ` +
        "owned by you (or root), or another user may write it (only a sticky one such as /tmp " +
        "may be)\n",
    });
    try {
      // A directory a user owns, above a cache root would make: the user could rename the
      // cache away and put its own deno there between the checks and the exec.
      Deno.mkdirSync(`${dir}/theirs`, { mode: 0o755 });
      Deno.chownSync(`${dir}/theirs`, 1000, 1000);
      assertEquals(await ctx(`${dir}/theirs/cache`), refuse(`${dir}/theirs/cache`));
      // Root's, but writable by all and not sticky.
      Deno.mkdirSync(`${dir}/open`, { mode: 0o777 });
      Deno.chmodSync(`${dir}/open`, 0o777);
      assertEquals(await ctx(`${dir}/open/cache`), refuse(`${dir}/open/cache`));
      // Nothing was unpacked or run from either.
      assertEquals(names(`${dir}/theirs/cache`), []);
      assertEquals(names(`${dir}/open/cache`), []);
      // Sticky and writable by all (as /tmp): nobody else can move root's cache inside it.
      Deno.mkdirSync(`${dir}/sticky`, { mode: 0o777 });
      Deno.chmodSync(`${dir}/sticky`, 0o1777);
      assertEquals(await ctx(`${dir}/sticky/cache`), {
        code: 0,
        stdout: `ctx ${VERSION}\n`,
        stderr: "",
      });
      assertEquals(names(`${dir}/sticky/cache`), [hash]);
      // A warm start checks the same chain: once the ancestor is a user's, it stops.
      Deno.chownSync(`${dir}/sticky`, 1000, 1000);
      const warm = await ctx(`${dir}/sticky/cache`);
      assertEquals([warm.code, warm.stdout], [69, ""]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("cortexfs install copies the file into --prefix, links every program to it, and writes (never starts) a unit", async () => {
  const { dir, file, home, varCache } = await lone();
  const prefix = `${dir}/bin`, units = `${dir}/units`;
  // As root the file unpacks into /var/cache: an empty one of this test's.
  const ns = root ? fresh({ binds: [[varCache, "/var/cache"]] }) : [];
  const run = (argv: string[], o: { cwd?: string } = {}) => exec([...ns, ...argv], o);
  try {
    const inst = () =>
      run([...clean(home), file, "install", "--prefix", prefix, "--service", "--unit-dir", units], {
        cwd: dir,
      });
    const want = {
      code: 0,
      stdout: [
        `${prefix}/cortexfs (copy of ${file})`,
        // permissions.json's order: every program the file carries, ctxterm included.
        ...["cortexfsd", "ctxterm", "ctx", "tsh"].map((n) => `${prefix}/${n} -> cortexfs`),
        `${prefix}/agent.sh`,
        `${units}/cortexfsd.service (written, not started: systemctl enable --now cortexfsd)`,
        "",
      ].join("\n"),
      stderr: "",
    };
    assertEquals(await inst(), want);
    assertEquals(Deno.readFileSync(`${prefix}/cortexfs`), Deno.readFileSync(file));
    assertEquals(Deno.readLinkSync(`${prefix}/ctx`), "cortexfs");
    assertEquals(
      Deno.readTextFileSync(`${prefix}/agent.sh`),
      Deno.readTextFileSync(new URL("../../cli/agent.sh", import.meta.url)),
    );
    const unit = Deno.readTextFileSync(`${units}/cortexfsd.service`);
    assertEquals(
      unit.split("\n").filter((l) => /^(ExecStart|ExecStartPre|Environment)=/.test(l)),
      [
        "Environment=CORTEXFS_CACHE=/var/cache/cortexfs",
        `ExecStartPre=${prefix}/ctx storage update --prune`,
        `ExecStart=${prefix}/cortexfsd`,
      ],
    );
    // The installed names run their programs.
    const v = await Promise.all(
      ["ctx", "cortexfsd"].map((n) => run([...clean(home), `${prefix}/${n}`, "--version"])),
    );
    assertEquals(v.map((o) => o.stdout), [`ctx ${VERSION}\n`, `cortexfsd ${VERSION}\n`]);
    // Installing again from the installed copy: nothing to copy, links replaced.
    const again = await run([...clean(home), `${prefix}/cortexfs`, "install", "--prefix", prefix]);
    assertEquals(again.stdout.split("\n")[0], `${prefix}/cortexfs (already this file)`);
    // A file that is not a symlink is not overwritten.
    Deno.removeSync(`${prefix}/tsh`);
    Deno.writeTextFileSync(`${prefix}/tsh`, "mine\n");
    const refused = await run([...clean(home), file, "install", "--prefix", prefix]);
    assertEquals({ code: refused.code, stderr: refused.stderr }, {
      code: 1,
      stderr: `cortexfs: EEXIST: ${prefix}/tsh: is not a symlink; remove it to install tsh here\n`,
    });
    assertEquals(Deno.readTextFileSync(`${prefix}/tsh`), "mine\n");
    if (root) {
      // An ordinary user's default prefix is ~/.local/bin.
      const user = `${dir}/user`;
      Deno.mkdirSync(user);
      Deno.chownSync(user, 65533, 65533);
      const mine = await run([...NOBODY, ...clean(user), file, "install"]);
      assertEquals(mine.code, 0, mine.stderr);
      assertEquals(Deno.readLinkSync(`${user}/.local/bin/ctx`), "cortexfs");
      assertEquals(Deno.statSync(`${user}/.local/bin/cortexfs`).uid, 65533);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
