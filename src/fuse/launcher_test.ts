import { assertEquals } from "../../tests/assert.ts";
import { launchers } from "./launcher.ts";

Deno.test("launchers: only binaries with a compiled file or an entry file are projected", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-launcher-" });
  try {
    await Deno.mkdir(`${dir}/cli`);
    await Deno.mkdir(`${dir}/dist/bin`, { recursive: true });
    await Deno.writeTextFile(`${dir}/cli/ctx.ts`, "");
    await Deno.writeTextFile(`${dir}/cli/tsh.ts`, "");
    await Deno.writeTextFile(`${dir}/dist/bin/tsh`, "");
    await Deno.mkdir(`${dir}/cli/ctxterm.ts`); // not a file: no launcher
    const got = launchers(dir, { ctx: ["--allow-read"], ctxterm: ["-A"] });
    assertEquals(got, {
      ctx: `#!/bin/sh\nexec '${dir}/tools/deno' run -q '--allow-read' '${dir}/cli/ctx.ts' "$@"\n`,
      tsh: `#!/bin/sh\nexec '${dir}/dist/bin/tsh' "$@"\n`,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("launchers: from the built single file every program it carries execs that file by name", () => {
  const got = launchers("/nonexistent", { ctx: ["--allow-read"] }, {
    built: { exe: "/opt/it's/cortexfs", programs: ["cortexfs", "ctx", "tsh", "cortexfsd"] },
  });
  assertEquals(got, {
    ctx: `#!/bin/sh\nexec '/opt/it'\\''s/cortexfs' ctx "$@"\n`,
    tsh: `#!/bin/sh\nexec '/opt/it'\\''s/cortexfs' tsh "$@"\n`,
    cortexfsd: `#!/bin/sh\nexec '/opt/it'\\''s/cortexfs' cortexfsd "$@"\n`,
  });
});
