/** CTX_PATH resolution, .tshrc data parsing and precedence. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import {
  ctxPathFor,
  mapView,
  normalizeView,
  parseTshrc,
  resolveTool,
  splitCtxPath,
} from "./resolve.ts";

Deno.test("resolveTool() takes the first executable regular file, left to right, only under /ctx", async () => {
  const root = await Deno.makeTempDir();
  try {
    for (const d of ["tool", "home/0/tool"]) Deno.mkdirSync(`${root}/${d}`, { recursive: true });
    Deno.writeTextFileSync(`${root}/tool/t`, "x", { mode: 0o644 }); // not executable: not a hit
    Deno.writeTextFileSync(`${root}/home/0/tool/t`, "x", { mode: 0o755 });
    Deno.chmodSync(`${root}/home/0/tool/t`, 0o755);
    const ctxPath = ["/usr/bin", "/ctx/tool", "/ctx/home/0/tool"];
    assertEquals(resolveTool("t", { root, ctxPath }), {
      path: "/ctx/home/0/tool/t",
      host: `${root}/home/0/tool/t`,
      dir: `${root}/home/0/tool/t.d`,
    });
    assertEquals(resolveTool("ls", { root, ctxPath }), null);
    assertEquals(resolveTool("../tool/t", { root, ctxPath }), null);
    assertEquals(mapView(root, "/ctx/../etc"), null);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test(".tshrc is data: CTX_PATH lines only, comments ignored, never shell", () => {
  assertEquals(
    parseTshrc("# mine\n\nexport X=1\nCTX_PATH=/ctx/tool:/ctx/home/0/tool\n$(rm -rf /)\n"),
    [
      "/ctx/tool",
      "/ctx/home/0/tool",
    ],
  );
  assertEquals(parseTshrc("# nothing\n"), null);
});

Deno.test("ctxPathFor(): agent view wins; standalone reads .tshrc, then CTX_PATH, then the default", () => {
  const rc = "CTX_PATH=/ctx/rc\n";
  assertEquals(ctxPathFor({ CTX_AGENT: "coder", CTX_PATH: "/ctx/view" }, { tshrc: rc, uid: 0 }), [
    "/ctx/view",
  ]);
  assertEquals(ctxPathFor({ CTX_PATH: "/ctx/env" }, { tshrc: rc, uid: 0 }), ["/ctx/rc"]);
  assertEquals(ctxPathFor({ CTX_PATH: "/ctx/env" }, { tshrc: null, uid: 0 }), ["/ctx/env"]);
  assertEquals(ctxPathFor({}, { uid: 7 }), ["/ctx/tool", "/ctx/home/7/tool"]);
});

Deno.test("CTX_PATH entries are canonical; entries outside /ctx after normalizing are dropped", () => {
  assertEquals(normalizeView("/ctx/./tool//"), "/ctx/tool");
  assertEquals(normalizeView("/../ctx/a/../tool"), "/ctx/tool");
  assertEquals(normalizeView("ctx/tool"), null);
  assertEquals(splitCtxPath("/ctx/../usr/bin::ctx/rel:/ctx/./tool/:/ctx//tool:/ctxfoo"), [
    "/ctx/tool",
  ]);
});

Deno.test(".tshrc: a CTX_PATH line naming nothing under /ctx is EINVAL, reported, and the file ignored", () => {
  assertThrows(() => parseTshrc("# x\nCTX_PATH=\n"), CtxError, 'line 2: CTX_PATH=""');
  assertThrows(() => parseTshrc("CTX_PATH=/usr/bin\n"), CtxError, "names no directory under /ctx");
  const said: string[] = [];
  const warn = (m: string) => said.push(m);
  assertEquals(ctxPathFor({ CTX_PATH: "/ctx/env" }, { tshrc: "CTX_PATH=\n", uid: 0, warn }), [
    "/ctx/env",
  ]);
  assertEquals(ctxPathFor({}, { tshrc: "CTX_PATH=\n", uid: 3, warn }), [
    "/ctx/tool",
    "/ctx/home/3/tool",
  ]);
  assertEquals(said.length, 2);
  assertEquals(said[0].startsWith("EINVAL: .tshrc line 1:"), true);
});
