/** Issue 8, hole 1: the sandbox never chooses its own view through `/workspace/.git` (gitdir lines, symlinks), and every `.git` stays read-only. */
import { assertEquals } from "../assert.ts";
import { probe, q, type Target, withTarget } from "../fixture/mod.ts";

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

Deno.test("a gitdir line a tool writes into /workspace/.git brings nothing into the next call's view", async () => {
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
      // The tool plants the line (nothing stops a tool creating /workspace/.git when there is none).
      assertEquals(
        await probe(t, `printf '%s\\n' ${q(line)} > /workspace/.git; cat /workspace/.git`, ws),
        [line],
      );
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

Deno.test("a .git symlink a tool plants (absolute, ../../../secret, ../../.. to the host root) binds nothing: the next call cannot read the host secret", async () => {
  await withTarget(async (t) => {
    const secret = await plantSecret(t);
    const deep = await workspace(t, "r/s/ws");
    const shallow = await workspace(t, "ws");
    // `..` once per component of the workspace path: on the host that is `/`.
    const up = shallow.split("/").slice(1).map(() => "..").join("/");
    const hostSecret = `err host cat ${q(`${secret.dir}/secret.txt`)}`;
    const links = [
      { ws: await workspace(t, "abs"), to: secret.dir },
      { ws: deep, to: "../../../secret" },
      { ws: shallow, to: up },
    ];
    for (const { ws, to } of links) {
      assertEquals(
        await probe(t, `ln -s ${q(to)} /workspace/.git; readlink /workspace/.git`, ws),
        [to],
      );
      // Inside, the link resolves in the sandbox's own view (where the secret does not exist).
      const [seen] = await Promise.all([
        probe(
          t,
          [
            `echo "link: $(readlink /workspace/.git)"`,
            "err cat cat /workspace/.git/secret.txt",
            hostSecret,
            leakProbe(secret.token),
          ].join("\n"),
          ws,
        ),
        t.bystander(),
      ]);
      assertEquals(seen, [
        `link: ${to}`,
        "cat: No such file or directory",
        "host: No such file or directory",
        "leaked: no",
      ]);
      assertEquals([...Deno.readDirSync(secret.dir)].map((e) => e.name), ["secret.txt"]);
    }
    await t.bystander();
  });
});
