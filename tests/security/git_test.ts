/** Issue 8, hole 1: the sandbox never chooses its own view through `/workspace/.git` (gitdir lines, symlinks), and every `.git` stays read-only. */
import { assertEquals } from "../assert.ts";
import { exists, probe, PROBES, q, run, type Target, withTarget } from "../fixture/mod.ts";

/** A root-only directory with a secret file: what a planted path tries to bring into view. */
async function plantSecret(t: Target): Promise<{ dir: string; token: string }> {
  const dir = `${t.tree.dir}/secret`;
  const token = `SECRET-${crypto.randomUUID()}`;
  await Deno.mkdir(dir, { mode: 0o700 });
  await Deno.writeTextFile(`${dir}/secret.txt`, token, { mode: 0o600 });
  return { dir, token };
}

/**
 * Probe lines that say whether `token` shows anywhere a sandbox process can reach (the kernel's
 * own trees and /usr left out). The script spells the token in two quoted halves, so the script
 * itself (which tsh may record) never holds it.
 */
function leakProbe(token: string): string {
  const spelled = `${q(token.slice(0, 4))}${q(token.slice(4))}`;
  return `can leaked grep -rqsF ${spelled} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev`;
}

/** A fresh workspace directory under the tree's temp dir. */
async function workspace(t: Target, name: string): Promise<string> {
  const ws = `${t.tree.dir}/${name}`;
  await Deno.mkdir(ws, { recursive: true });
  return ws;
}

Deno.test("a gitdir line in /workspace/.git brings nothing into the next call's view", async () => {
  await withTarget(async (t) => {
    const secret = await plantSecret(t);
    const pid = t.daemon.child.pid;
    // What each planted path would show if the host bound it: the secret, an agent socket, the
    // host's processes (the daemon among them).
    const targets = [
      {
        path: secret.dir,
        probes: [
          `can exists test -e ${q(secret.dir)}`,
          `err cat cat ${q(`${secret.dir}/secret.txt`)}`,
          leakProbe(secret.token),
        ],
        want: ["exists: no", "cat: No such file or directory", "leaked: no"],
      },
      {
        path: t.tree.run,
        probes: [
          `can exists test -e ${q(t.tree.run)}`,
          `can socket test -S ${q(`${t.tree.run}/agent/coder.sock`)}`,
          `echo "sockets: $(find / \\( -path /proc -o -path /sys -o -path /usr \\) -prune -o -type s -print | wc -l)"`,
        ],
        want: ["exists: no", "socket: no", "sockets: 0"],
      },
      {
        path: "/proc",
        probes: [`can host-proc grep -qs cortexfsd /proc/${pid}/cmdline`],
        want: ["host-proc: no"],
      },
    ];
    for (const [i, target] of targets.entries()) {
      const ws = await workspace(t, `ws-${i}`);
      const line = `gitdir: ${target.path}`;
      // A tool cannot plant it (an absent /workspace/.git is an empty read-only directory, see
      // below): the line stands for one planted before that, or by anyone else.
      await Deno.writeTextFile(`${ws}/.git`, `${line}\n`);
      // The next call: /workspace/.git is that very file, read-only, and what it names is absent.
      const [seen] = await Promise.all([
        probe(
          t,
          [
            `echo "git: $(cat /workspace/.git)"`,
            `err append bash -c 'echo x >> /workspace/.git'`,
            ...target.probes,
          ].join("\n"),
          ws,
        ),
        t.bystander(),
      ]);
      assertEquals(seen, [`git: ${line}`, "append: Read-only file system", ...target.want]);
      assertEquals(await Deno.readTextFile(`${ws}/.git`), `${line}\n`);
    }
    await t.bystander();
  });
});

Deno.test("a worktree's .git file is bound read-only as that file, and the gitdir it names is not bound", async () => {
  await withTarget(async (t) => {
    const secret = await plantSecret(t);
    const ws = await workspace(t, "wt");
    const line = `gitdir: ${secret.dir}`;
    await Deno.writeTextFile(`${ws}/.git`, `${line}\n`);
    const [seen] = await Promise.all([
      probe(
        t,
        [
          `echo "git: $(cat /workspace/.git)"`,
          `err append bash -c 'echo x >> /workspace/.git'`,
          `err truncate bash -c ': > /workspace/.git'`,
          "err rm rm -f /workspace/.git",
          "err mv mv /workspace/.git /workspace/git.old",
          `can gitdir test -e ${q(secret.dir)}`,
          leakProbe(secret.token),
          "err other bash -c 'echo mine > /workspace/notes.txt'",
        ].join("\n"),
        ws,
      ),
      t.bystander(),
    ]);
    assertEquals(seen, [
      `git: ${line}`,
      "append: Read-only file system",
      "truncate: Read-only file system",
      "rm: Device or resource busy",
      "mv: Device or resource busy",
      "gitdir: no",
      "leaked: no",
      "other: ok",
    ]);
    assertEquals(await Deno.readTextFile(`${ws}/.git`), `${line}\n`);
    assertEquals(await Deno.readTextFile(`${ws}/notes.txt`), "mine\n");
    await t.bystander();
  });
});

Deno.test("the workspace's .git directory and a nested sub/lib/.git are read-only; the rest of /workspace is writable", async () => {
  await withTarget(async (t) => {
    const ws = await workspace(t, "repo");
    for (const git of [`${ws}/.git`, `${ws}/sub/lib/.git`]) {
      await Deno.mkdir(`${git}/hooks`, { recursive: true });
      await Deno.writeTextFile(`${git}/HEAD`, "ref: refs/heads/main\n");
      await Deno.writeTextFile(`${git}/config`, "[core]\n");
    }
    await Deno.writeTextFile(`${ws}/sub/lib/code.txt`, "code\n");
    const attacks = (g: string, n: string) => [
      `err ${n}-head bash -c 'echo x >> ${g}/HEAD'`,
      `err ${n}-config bash -c 'printf "[core]\\n\\tfsmonitor = /workspace/evil\\n" > ${g}/config'`,
      `err ${n}-hook bash -c 'echo "#!/bin/sh" > ${g}/hooks/pre-commit'`,
      `err ${n}-rm rm ${g}/HEAD`,
      `err ${n}-mv mv ${g} ${g}.old`,
    ];
    const [seen] = await Promise.all([
      probe(
        t,
        [
          ...attacks("/workspace/.git", "top"),
          ...attacks("/workspace/sub/lib/.git", "nested"),
          "err new bash -c 'echo new > /workspace/new.txt'",
          "err code bash -c 'echo more >> /workspace/sub/lib/code.txt'",
          "err mkdir mkdir /workspace/sub/lib/build",
        ].join("\n"),
        ws,
      ),
      t.bystander(),
    ]);
    const refused = (n: string) => [
      `${n}-head: Read-only file system`,
      `${n}-config: Read-only file system`,
      `${n}-hook: Read-only file system`,
      `${n}-rm: Read-only file system`,
      `${n}-mv: Device or resource busy`,
    ];
    assertEquals(seen, [
      ...refused("top"),
      ...refused("nested"),
      "new: ok",
      "code: ok",
      "mkdir: ok",
    ]);
    for (const git of [`${ws}/.git`, `${ws}/sub/lib/.git`]) {
      assertEquals({
        head: await Deno.readTextFile(`${git}/HEAD`),
        config: await Deno.readTextFile(`${git}/config`),
        hooks: [...Deno.readDirSync(`${git}/hooks`)],
      }, { head: "ref: refs/heads/main\n", config: "[core]\n", hooks: [] });
    }
    assertEquals(await Deno.readTextFile(`${ws}/new.txt`), "new\n");
    assertEquals(await Deno.readTextFile(`${ws}/sub/lib/code.txt`), "code\nmore\n");
    await t.bystander();
  });
});

Deno.test("a .git symlink at the workspace root (absolute, ../../../secret, ../../.. to the host root) is refused: nothing starts, nothing is bound", async () => {
  await withTarget(async (t) => {
    const secret = await plantSecret(t);
    const deep = await workspace(t, "r/s/ws");
    const shallow = await workspace(t, "ws");
    // `..` once per component of the workspace path: on the host that is `/`.
    const up = shallow.split("/").slice(1).map(() => "..").join("/");
    const links = [
      { ws: await workspace(t, "abs"), to: secret.dir },
      { ws: deep, to: "../../../secret" },
      { ws: shallow, to: up },
    ];
    for (const { ws, to } of links) {
      // The host's git would follow it, so the launch is refused; nothing the tool says runs.
      await Deno.symlink(to, `${ws}/.git`);
      const [r] = await Promise.all([
        t.ctx(["agent", "tsh", "coder", "--", "bash", "touch /workspace/ran"], { cwd: ws }),
        t.bystander(),
      ]);
      assertEquals({ refused: r.code !== 0, ran: exists(`${ws}/ran`) }, {
        refused: true,
        ran: false,
      });
      assertEquals(Deno.readLinkSync(`${ws}/.git`), to);
      assertEquals([...Deno.readDirSync(secret.dir)].map((e) => e.name), ["secret.txt"]);
    }
    await t.bystander();
  });
});

/** The user's own git on the host, in `dir`, with the repository's config only (no system or global one). */
async function hostGit(t: Target, dir: string, ...args: string[]): Promise<number> {
  const r = await run(["git", "-C", dir, ...args], {
    env: {
      PATH: "/usr/bin:/bin",
      HOME: t.tree.dir,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
    },
  });
  return r.code;
}

/**
 * Tool lines that make `<ws>/.git` (if the tool may write it) run `<marker>`'s creation on the
 * host's next `git status`: an executable in the workspace named by `core.fsmonitor`.
 */
function plantFsmonitor(ws: string, marker: string): string {
  const hook = `${ws}/evil.sh`;
  return [
    `printf '#!/bin/sh\\ntouch %s\\n' ${q(marker)} > /workspace/evil.sh`,
    "chmod +x /workspace/evil.sh",
    `err config git config --file /workspace/.git/config core.fsmonitor ${q(hook)}`,
  ].join("\n");
}

Deno.test("hundreds of nested .git directories a tool makes do not leave /workspace/.git writable: the next launch is refused, and the host's git runs nothing", async () => {
  await withTarget(async (t) => {
    const ws = await workspace(t, "repo");
    assertEquals(await hostGit(t, ws, "init", "-q"), 0);
    const config = await Deno.readTextFile(`${ws}/.git/config`);
    const marker = `${t.tree.dir}/fsmonitor-ran`;
    // Step 1: far more nested .git directories than the search finds, each made after the root's
    // (so a depth-first walk in directory order meets them first).
    const [made] = await Promise.all([
      probe(
        t,
        "for i in $(seq 600); do mkdir -p /workspace/d$i/.git; done; ls -d /workspace/d*/.git | wc -l",
        ws,
      ),
      t.bystander(),
    ]);
    assertEquals(made, ["600"]);
    // Step 2: the tool tries to make the host's git run its program.
    const [r] = await Promise.all([
      t.ctx(["agent", "tsh", "coder", "--", "bash", `${PROBES}\n${plantFsmonitor(ws, marker)}`], {
        cwd: ws,
      }),
      t.bystander(),
    ]);
    assertEquals(await hostGit(t, ws, "status", "--porcelain"), 0);
    assertEquals(exists(marker), false, "the host's git ran the planted fsmonitor");
    assertEquals(await Deno.readTextFile(`${ws}/.git/config`), config, r.stdout);
    // The launch was refused whole (E2BIG): nothing of step 2 ran.
    assertEquals({ refused: r.code !== 0, script: exists(`${ws}/evil.sh`) }, {
      refused: true,
      script: false,
    });
    await t.bystander();
  });
});

Deno.test("in a workspace that is a subdirectory of a repository, a tool cannot git init /workspace: the host's git there still obeys only the parent's repository", async () => {
  await withTarget(async (t) => {
    const parent = await workspace(t, "parent");
    assertEquals(await hostGit(t, parent, "init", "-q"), 0);
    const ws = await workspace(t, "parent/sub");
    await Deno.writeTextFile(`${ws}/code.txt`, "code\n");
    const marker = `${t.tree.dir}/fsmonitor-ran`;
    const [seen] = await Promise.all([
      probe(
        t,
        [
          "err rm rm -rf /workspace/.git",
          "err init git init -q /workspace",
          `err head bash -c 'echo "ref: refs/heads/main" > /workspace/.git/HEAD'`,
          plantFsmonitor(ws, marker),
          // What the agent does instead: a repository of its own outside /workspace.
          "err own git --git-dir=/tmp/repo init -q",
          "err add git --git-dir=/tmp/repo --work-tree=/workspace add code.txt",
        ].join("\n"),
        ws,
      ),
      t.bystander(),
    ]);
    // The host's git from the workspace finds the parent's repository (the empty .git is none)
    // and runs nothing the tool wrote.
    assertEquals(await hostGit(t, ws, "status", "--porcelain"), 0);
    assertEquals(exists(marker), false, "the host's git ran the planted fsmonitor");
    assertEquals([...Deno.readDirSync(`${ws}/.git`)], []);
    assertEquals(seen.map((l) => l.split(":")[0] + (l.endsWith(": ok") ? ": ok" : ": refused")), [
      "rm: refused",
      "init: refused",
      "head: refused",
      "config: refused",
      "own: ok",
      "add: ok",
    ]);
    const top = await run(["git", "-C", ws, "rev-parse", "--show-toplevel"], {
      env: { PATH: "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
    });
    assertEquals(top.stdout.trim(), Deno.realPathSync(parent));
    await t.bystander();
  });
});

Deno.test("what a repository's config has git run from inside the workspace (core.hooksPath) is read-only; so is the gitdir a .git file names there", async () => {
  await withTarget(async (t) => {
    const ws = await workspace(t, "husky");
    assertEquals(await hostGit(t, ws, "init", "-q"), 0);
    assertEquals(await hostGit(t, ws, "config", "core.hooksPath", ".githooks"), 0);
    await Deno.mkdir(`${ws}/.githooks`);
    const [seen] = await Promise.all([
      probe(
        t,
        [
          `err hook bash -c 'echo "#!/bin/sh" > /workspace/.githooks/pre-commit'`,
          "err other bash -c 'echo x > /workspace/other.txt'",
        ].join("\n"),
        ws,
      ),
      t.bystander(),
    ]);
    assertEquals(seen, ["hook: Read-only file system", "other: ok"]);
    assertEquals([...Deno.readDirSync(`${ws}/.githooks`)], []);
    // A .git file whose gitdir lies in the workspace: that directory is bound read-only too.
    const wt = await workspace(t, "wt");
    await Deno.mkdir(`${wt}/gd`);
    await Deno.writeTextFile(`${wt}/gd/config`, "[core]\n");
    await Deno.writeTextFile(`${wt}/.git`, "gitdir: gd\n");
    const [gd] = await Promise.all([
      probe(t, `err config bash -c 'echo "[core]" >> /workspace/gd/config'`, wt),
      t.bystander(),
    ]);
    assertEquals(gd, ["config: Read-only file system"]);
    assertEquals(await Deno.readTextFile(`${wt}/gd/config`), "[core]\n");
    await t.bystander();
  });
});
