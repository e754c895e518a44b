/** replaceFilesSoon(): several files of one directory replaced together, fsyncs off the JS thread. */
import { assert, assertEquals, assertRejects } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { asUser } from "../sys/fsid.ts";
import { replaceFilesSoon } from "./atomic.ts";
import { DENO } from "../../tests/fixture/paths.ts";

const names = (dir: string) => [...Deno.readDirSync(dir)].map((e) => e.name).sort();

Deno.test("replaceFilesSoon() replaces every file whole with the exact mode and leaves no temp", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/state`, "idle\n");
    const old = Deno.statSync(`${dir}/state`).ino;
    // The mode asked for wins over the process umask. The umask is the whole process's and the
    // test modules of a --parallel run share one process, so the 077 is set in a child of its own.
    const [mod, at] = [import.meta.resolve("./atomic.ts"), JSON.stringify(dir)];
    const files = JSON.stringify({ state: "done\n", "latest.md": "hi" });
    const code = `Deno.umask(0o077);
      const { replaceFilesSoon } = await import("${mod}");
      await replaceFilesSoon(${at}, ${files}, { mode: 0o640 });`;
    const out = await new Deno.Command(DENO, { args: ["eval", "--quiet", code] }).output();
    assert(out.success, new TextDecoder().decode(out.stderr));
    assertEquals(names(dir), ["latest.md", "state"]);
    assertEquals(Deno.readTextFileSync(`${dir}/state`), "done\n");
    assertEquals(Deno.readTextFileSync(`${dir}/latest.md`), "hi");
    for (const n of names(dir)) assertEquals(Deno.statSync(`${dir}/${n}`).mode! & 0o7777, 0o640);
    assert(Deno.statSync(`${dir}/state`).ino !== old, "renamed over, not rewritten in place");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("replaceFilesSoon() resolves names inside `act`: as uid 65534 a root-only directory is EACCES and nothing is left; its own directory gets files it owns", async () => {
  const dir = Deno.makeTempDirSync(); // 0700 root's
  const nobody = { uid: 65534, gid: 65534, groups: [] };
  const act = <T>(fn: () => T) => asUser(nobody, fn);
  try {
    Deno.writeTextFileSync(`${dir}/state`, "idle\n");
    const err = await assertRejects(
      () => replaceFilesSoon(dir, { state: "done\n" }, { mode: 0o600, act }),
      CtxError,
    );
    assertEquals(err.errno, "EACCES");
    assertEquals(names(dir), ["state"]);
    assertEquals(Deno.readTextFileSync(`${dir}/state`), "idle\n");

    Deno.mkdirSync(`${dir}/own`, { mode: 0o700 });
    Deno.chownSync(`${dir}/own`, 65534, 65534);
    Deno.chmodSync(dir, 0o711);
    await replaceFilesSoon(`${dir}/own`, { state: "done\n", updated_at: "1\n" }, {
      mode: 0o600,
      act,
    });
    assertEquals(names(`${dir}/own`), ["state", "updated_at"]);
    for (const n of ["state", "updated_at"]) {
      const st = Deno.statSync(`${dir}/own/${n}`);
      assertEquals([st.uid, st.gid], [65534, 65534], n);
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
