/** self() and programArgv(): the argv that starts a program, from a checkout and from the built file. */
import { assertEquals } from "../../tests/assert.ts";
import permissions from "./permissions.json" with { type: "json" };
import { BUILT_RUN, programArgv, self } from "./self.ts";
import { ignore } from "../abi/errno.ts";

const REPO = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("self() from the checkout: its cli/ entries; programArgv runs the pinned deno on cli/<name>.ts with its flags", () => {
  const s = self({});
  assertEquals(s, {
    kind: "checkout",
    checkout: REPO,
    programs: Object.keys(permissions).filter((n) => {
      try {
        return Deno.statSync(`${REPO}/cli/${n}.ts`).isFile;
      } catch (e) {
        ignore(e, Deno.errors.NotFound);
        return false;
      }
    }),
  });
  assertEquals(programArgv(s, "cortexfsd", ["instance", "x"]), [
    Deno.execPath(),
    "run",
    "--quiet",
    "--no-prompt",
    `--config=${REPO}/deno.json`,
    ...permissions.cortexfsd,
    `${REPO}/cli/cortexfsd.ts`,
    "instance",
    "x",
  ]);
});

Deno.test("self() inside the built file: the programs with a bundle in lib; programArgv runs lib/deno on lib/<name>.js", async () => {
  const lib = await Deno.makeTempDir({ prefix: "cortexfs-lib-" });
  try {
    for (const f of ["ctx.js", "tsh.js", "chunk-ABC.js", "worker.js"]) {
      Deno.writeTextFileSync(`${lib}/${f}`, "");
    }
    const s = self({ CORTEXFS_SELF: "/usr/local/bin/cortexfs" }, `file://${lib}/chunk-ABC.js`);
    assertEquals(s, {
      kind: "built",
      exe: "/usr/local/bin/cortexfs",
      lib,
      programs: ["ctx", "tsh"],
    });
    assertEquals(programArgv(s, "tsh", ["tools"]), [
      `${lib}/deno`,
      ...BUILT_RUN,
      ...permissions.tsh,
      `${lib}/tsh.js`,
      "tools",
    ]);
    let err = "";
    try {
      programArgv(s, "cortexfsd");
    } catch (e) {
      err = String(e);
    }
    assertEquals(err, 'Error: no program "cortexfsd" here (there are: ctx, tsh)');
  } finally {
    await Deno.remove(lib, { recursive: true });
  }
});

Deno.test("self() inside the built file: exe is CORTEXFS_SELF with its symlinks resolved (the header exports the path it was started by)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-self-" });
  try {
    const file = `${Deno.realPathSync(dir)}/cortexfs-9.9.9-linux-x86_64`;
    Deno.writeTextFileSync(file, "");
    Deno.mkdirSync(`${dir}/bin`);
    Deno.symlinkSync("../cortexfs-9.9.9-linux-x86_64", `${dir}/bin/ctx`);
    const url = `file://${dir}/lib/ctx.js`;
    assertEquals(self({ CORTEXFS_SELF: `${dir}/bin/ctx` }, url), {
      kind: "built",
      exe: file,
      lib: `${dir}/lib`,
      programs: [],
    });
    assertEquals(self({}, url), { kind: "built", exe: undefined, lib: `${dir}/lib`, programs: [] });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
