/** startMountThread: the mount on a worker of its own; its handle, start errors and the hook bound. */
import { assert, assertEquals } from "../assert.ts";
import { CtxError } from "../../src/abi/errno.ts";
import { mountedType, type MountThread, startMountThread } from "../../src/fuse/mod.ts";
import { CONFIG, CTX, DENO, makeTree, sh, type Tree } from "../fixture/mod.ts";

function options(tree: Tree) {
  return {
    root: tree.root,
    storage: tree.storage,
    generation: "1",
    mount: tree.mount,
    run: tree.run,
    bins: {},
  };
}

/** Runs `body` with a fresh tree; whatever is still mounted is lazily unmounted after. */
async function withTree(body: (tree: Tree) => Promise<void>): Promise<void> {
  const tree = await makeTree();
  try {
    await body(tree);
  } finally {
    if (mountedType(tree.mount) !== null) {
      await new Deno.Command("umount", { args: ["-l", tree.mount] }).output();
    }
    await Deno.remove(tree.dir, { recursive: true }).catch(() => {});
  }
}

/** This thread's umask, from /proc (reading it with umask(2) would change it for a moment). */
function umask(): string {
  return Deno.readTextFileSync("/proc/thread-self/status").match(/^Umask:\s*(\d+)/m)?.[1] ?? "";
}

Deno.test("startMountThread serves from a worker: stat answers, this thread keeps its umask, stop() unmounts and ends done", async () => {
  await withTree(async (tree) => {
    const before = umask();
    const h = await startMountThread(options(tree));
    const st = await Deno.stat(`${tree.mount}/status`);
    // The worker's umask 0 is its own (unshared fs_struct): not this thread's, nor its children's.
    assertEquals({ umask: umask(), child: (await sh("umask")).stdout }, {
      umask: before,
      child: `${before}\n`,
    });
    const made = await sh(`mkdir ${tree.mount}/home/0/d && stat -c %a ${tree.mount}/home/0/d`);
    // Made through the mount with the caller's umask applied once (by the kernel), not twice.
    assertEquals(made.stdout, `${(0o777 & ~parseInt(before, 8)).toString(8)}\n`);
    await h.stop();
    // Our own unmount: the loop sees either its stop flag or the device's ENODEV first.
    const why = await h.done;
    assertEquals(
      { via: h.mounted.via, prepared: h.prepared, file: st.isFile, ours: why !== "destroyed" },
      { via: "mount", prepared: "free", file: true, ours: true },
    );
    assertEquals(mountedType(tree.mount), null);
  });
});

Deno.test("startMountThread over a live mount rejects with the mount's EBUSY; the live one keeps serving", async () => {
  await withTree(async (tree) => {
    const h = await startMountThread(options(tree));
    try {
      const e = await startMountThread(options(tree)).then(() => null, (x) => x);
      assert(e instanceof CtxError, String(e));
      assertEquals({ errno: e.errno, path: e.path }, { errno: "EBUSY", path: tree.mount });
      assertEquals((await Deno.stat(`${tree.mount}/status`)).isFile, true);
    } finally {
      await h.stop();
    }
  });
});

Deno.test("an agent hook that never finishes holds the rename's reply for hookWaitMs, not forever", async () => {
  await withTree(async (tree) => {
    const called: string[] = [];
    let release = () => {};
    const never = new Promise<void>((r) => release = r);
    let h: MountThread | null = null;
    try {
      h = await startMountThread({
        ...options(tree),
        hookWaitMs: 200,
        onAgent: (name) => {
          called.push(name);
          return never;
        },
      });
      // `ctx agent new` through the mount ends with the rename that calls onAgent.
      const child = new Deno.Command(DENO, {
        args: ["run", "-A", "--quiet", `--config=${CONFIG}`, CTX, "agent", "new", "late"],
        env: { CTX_ROOT: tree.mount },
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const out = await Promise.race([
        child.output(),
        new Promise<null>((r) => timer = setTimeout(() => r(null), 20_000)),
      ]).finally(() => clearTimeout(timer));
      if (out === null) {
        child.kill("SIGKILL");
        await child.output();
      }
      assertEquals(
        { code: out?.code, called, entry: Deno.statSync(`${tree.root}/agent/late`).isFile },
        { code: 0, called: ["late"], entry: true },
      );
    } finally {
      release();
      await h?.stop();
    }
  });
});
