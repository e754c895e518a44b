/** planView(): the agent's mount/root/cwd controls become binds, or fail closed with the rule that failed. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import type { MountEntry } from "../abi/mount.ts";
import { planView, procSubmounts, type ViewInput } from "./mounts.ts";
import { profile } from "./profile.ts";

async function tree() {
  const t = await Deno.makeTempDir({ prefix: "cortexfs-mounts-" });
  for (
    const d of ["ctx/agent/coder.d", "ctx/home/0/data/data/deep", "ws/sub", "home", "data", "other"]
  ) {
    Deno.mkdirSync(`${t}/${d}`, { recursive: true });
  }
  Deno.writeTextFileSync(`${t}/ws/file`, "x");
  return Deno.realPathSync(t);
}

const layout = { links: { bin: "usr/bin" }, dirs: ["usr"], etc: [] };
const none = { submounts: () => false };

function input(t: string, mount: MountEntry[], more: Partial<ViewInput> = {}): ViewInput {
  return {
    ctx: `${t}/ctx`,
    home: `${t}/home`,
    workspace: `${t}/ws`,
    mount,
    cwd: "/workspace",
    layout,
    ...more,
  };
}

const line = (
  source: string,
  target: string,
  mode: "ro" | "rw" = "ro",
  options: MountEntry["options"] = [],
): MountEntry => ({ source, target, mode, options });

Deno.test("planView() binds mount lines parents first, maps /ctx sources, replaces /workspace", async () => {
  const t = await tree();
  try {
    const plan = planView(
      input(t, [
        line(`${t}/data`, "/srv/data/deep", "rw", ["rbind", "nosuid", "nodev"]),
        line("/ctx/home/0/data", "/srv", "ro", ["bind"]),
        line(`${t}/other`, "/workspace", "ro"),
        line("/ctx", "/ctx", "ro", ["rbind", "nosuid", "nodev"]), // the default, restated
      ], { cwd: "/srv/data" }),
      none,
    );
    assertEquals(plan, {
      workspace: `${t}/other`,
      workspaceMode: "ro",
      mounts: [
        { src: `${t}/ctx/home/0/data`, dst: "/srv", mode: "ro" },
        { src: `${t}/data`, dst: "/srv/data/deep", mode: "rw" },
      ],
      root: undefined,
      cwd: "/srv/data",
    });
    const p = profile({
      ctx: `${t}/ctx`,
      home: `${t}/home`,
      uid: 0,
      gid: 0,
      network: false,
      env: {},
      command: ["/bin/true"],
      ...plan,
      protect: [{ fd: 9, dst: "/workspace/.git" }],
    }, { dataDir: "/d", layout });
    const at = p.args.indexOf("/workspace");
    assertEquals(p.args.slice(at - 2, at + 16), [
      "--ro-bind",
      `${t}/other`,
      "/workspace",
      "--ro-bind",
      `${t}/ctx/home/0/data`,
      "/srv",
      "--bind",
      `${t}/data`,
      "/srv/data/deep",
      "--ro-bind-fd",
      "9",
      "/workspace/.git",
      "--chdir",
      "/srv/data",
      "--cap-drop",
      "ALL",
      "--clearenv",
    ]); // deno-fmt-ignore
  } finally {
    await Deno.remove(t, { recursive: true });
  }
});

Deno.test("planView() fails closed: owned targets, control-plane rw, unenforceable options, missing sources", async () => {
  const t = await tree();
  try {
    const cases: [MountEntry, string, string][] = [
      [
        line(`${t}/data`, "/ctx/tool"),
        "EACCES",
        'target "/ctx/tool" is owned by the sandbox runtime',
      ],
      [line(`${t}/data`, "/home"), "EACCES", 'target "/home" would cover "/home/agent"'],
      [line(`${t}/data`, "/opt"), "EACCES", 'target "/opt" would cover "/opt/cortexfs"'],
      [line(`${t}/data`, "/proc/x"), "EACCES", 'target "/proc/x" is owned by the sandbox runtime'],
      [
        line(`${t}/data`, "/home/agent"),
        "EACCES",
        'target "/home/agent" is owned by the sandbox runtime',
      ],
      [line(`${t}/data`, "/workspace/.git", "rw"), "EACCES", "under the read-only /workspace/.git"],
      [line("/ctx/agent/coder.d", "/x", "rw"), "EACCES", "is the tree's control plane"],
      [line(`${t}/ctx/agent`, "/x", "rw"), "EACCES", "is the tree's control plane"],
      [line("/ctx", "/x", "rw"), "EACCES", "is the tree's control plane"],
      [line(`${t}/data`, "/x", "ro", ["noexec"]), "ENOTSUP", "bubblewrap cannot mount noexec"],
      [line(`${t}/nope`, "/x"), "ENOENT", `source "${t}/nope" does not exist`],
    ]; // deno-fmt-ignore
    for (const [entry, errno, text] of cases) {
      const e = assertThrows(() => planView(input(t, [entry]), none), CtxError);
      assertEquals([e.errno, e.message.includes(text)], [errno, true], `${entry.target}: ${e}`);
    }
    // rw below home/ or shared/ of the tree is data, not control plane.
    assertEquals(
      planView(input(t, [line("/ctx/home/0/data", "/x", "rw")]), none).mounts,
      [{ src: `${t}/ctx/home/0/data`, dst: "/x", mode: "rw" }],
    );
    // "bind" means non-recursive: only when nothing is (or may be) mounted below the source.
    const bind = line(`${t}/data`, "/x", "ro", ["bind"]);
    for (const submounts of [() => true, () => null]) {
      const e = assertThrows(() => planView(input(t, [bind]), { submounts }), CtxError);
      assertEquals(e.errno, "ENOTSUP");
    }
    assertEquals(planView(input(t, [bind]), none).mounts.length, 1);
  } finally {
    await Deno.remove(t, { recursive: true });
  }
});

Deno.test("planView() checks cwd: inside the view it must exist (ENOENT), outside it is EACCES", async () => {
  const t = await tree();
  try {
    const cwd = (c: string, more: Partial<ViewInput> = {}) => {
      try {
        return planView(input(t, [line(`${t}/data`, "/srv")], { cwd: c, ...more }), none).cwd;
      } catch (e) {
        return (e as CtxError).errno;
      }
    };
    assertEquals(
      [
        cwd("/workspace/sub"),
        cwd("/workspace/none"),
        cwd("/workspace/file"),
        cwd("/home/agent"),
        cwd("/srv"),
        cwd("/tmp"),
        cwd("/tmp/x"),
        cwd("/usr/bin"),
        cwd("/bin"),
        cwd("/root"),
        cwd("/etc"),
      ],
      [
        "/workspace/sub",
        "ENOENT",
        "ENOTDIR",
        "/home/agent",
        "/srv",
        "/tmp",
        "ENOENT",
        "/usr/bin",
        "/bin",
        "EACCES",
        "EACCES",
      ],
    );
    // With a root control, the root's own directories are in the view.
    Deno.mkdirSync(`${t}/other/srv2`);
    assertEquals(cwd("/srv2", { root: `${t}/other` }), "/srv2");
    assertEquals(cwd("/srv3", { root: `${t}/other` }), "ENOENT");
  } finally {
    await Deno.remove(t, { recursive: true });
  }
});

Deno.test("procSubmounts() sees a mount below a path and none below a fresh temp dir", async () => {
  const t = await Deno.makeTempDir();
  try {
    assertEquals(procSubmounts("/"), true);
    assertEquals(procSubmounts(Deno.realPathSync(t)), false);
  } finally {
    await Deno.remove(t);
  }
});
