/** guardView: what a writable bind of the tree may not reach (session history) is masked. */
import { CtxError } from "../abi/errno.ts";
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { guardView, treeData } from "./guard.ts";

const TREE = "/srv/cortexfs/storage/generations/1";
const p = { hidden: ["/srv/cortexfs/storage", "/run/cortexfs"], tree: [TREE, "/ctx"] };

Deno.test("guardView() masks home and shared of a writable bind of the tree's root (through the backing tree or the mount)", () => {
  for (const src of [TREE, "/ctx"]) {
    assertEquals(guardView([{ src, dst: "/workspace", mode: "rw" }], p), [
      "/workspace/home",
      "/workspace/shared",
    ]);
  }
});

Deno.test("guardView() masks nothing of a read-only bind of the tree's root", () => {
  assertEquals(guardView([{ src: "/ctx", dst: "/workspace", mode: "ro" }], p), []);
});

Deno.test("guardView() masks the leading child of home/<u> and shared, refuses a writable bind inside a session", () => {
  assertEquals(
    guardView([
      { src: "/ctx/home/0", dst: "/workspace", mode: "rw" },
      { src: "/ctx/shared", dst: "/x", mode: "rw" },
    ], p),
    ["/workspace/agent", "/x/agents"],
  );
  const e = assertThrows(
    () => guardView([{ src: "/ctx/home/0/agent/coder/session/s", dst: "/w", mode: "rw" }], p),
    CtxError,
  );
  assertEquals(e.errno, "EACCES");
});

Deno.test("guardView() refuses a client's cwd in the backing tree as storage, and takes one in the mount as the tree", () => {
  const e = assertThrows(
    () => guardView([{ src: `${TREE}/home/0`, dst: "/workspace", mode: "rw", cwd: true }], p),
    CtxError,
  );
  assertEquals([e.errno, e.message.includes(`private state ("/srv/cortexfs/storage")`)], [
    "EACCES",
    true,
  ]);
  assertEquals(
    guardView([{ src: "/ctx/home/0", dst: "/workspace", mode: "rw", cwd: true }], p),
    ["/workspace/agent"],
  );
});

Deno.test("treeData(): only home/<...> and shared/<...> are the tree's data; the rest is the control plane", () => {
  const tree = ["/s/generations/1", "/ctx"];
  assertEquals(
    [
      "/ctx",
      "/ctx/agent",
      "/ctx/agent/coder.d",
      "/ctx/home",
      "/ctx/home/0",
      "/ctx/shared/x",
      "/tmp",
    ]
      .map((s) => treeData(s, tree)),
    [false, false, false, false, true, true, null],
  );
});

Deno.test("guardView() lists agent homes without following a symlink the user put in their place", () => {
  const t = Deno.makeTempDirSync({ prefix: "guard-" });
  try {
    const tree = `${t}/storage/generations/1`;
    Deno.mkdirSync(`${tree}/home/1000/agent/mine`, { recursive: true });
    Deno.mkdirSync(`${t}/secret/private-name`, { recursive: true });
    const q = { hidden: [`${t}/storage`], tree: [tree, `${t}/mnt`] };
    const bind = [{ src: `${t}/mnt/home/1000/agent`, dst: "/workspace", mode: "rw" as const }];
    assertEquals(guardView(bind, q), ["/workspace/mine"]);
    // The user swaps its agent dir for a link to a dir it cannot list: no name of it is used.
    Deno.renameSync(`${tree}/home/1000/agent`, `${tree}/home/1000/agent.old`);
    Deno.symlinkSync(`${t}/secret`, `${tree}/home/1000/agent`);
    assertEquals(guardView(bind, q), []);
  } finally {
    Deno.removeSync(t, { recursive: true });
  }
});
