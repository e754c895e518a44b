/** The single file's header, with a stand-in deno that prints its argv: dispatch and flags. */
import { assertEquals } from "../tests/assert.ts";
import { pack } from "./single.ts";
import { BUILT_RUN } from "../src/program/self.ts";

/** Packs a payload whose `deno` prints its arguments, for `programs`; returns the file and HOME. */
async function fake(programs: Record<string, string[]>) {
  const dir = await Deno.makeTempDir({ prefix: "cortexfs-header-" });
  const lib = `${dir}/lib`;
  Deno.mkdirSync(lib);
  Deno.writeTextFileSync(
    `${lib}/deno`,
    '#!/bin/sh\nfor a; do printf "%s\\n" "$a"; done\necho "SELF=$CORTEXFS_SELF"\n',
  );
  for (const n of Object.keys(programs)) Deno.writeTextFileSync(`${lib}/${n}.js`, "");
  const r = await pack(lib, {
    out: `${dir}/cortexfs-9.9.9-linux-x86_64`,
    programs,
    version: "9.9.9",
  });
  Deno.mkdirSync(`${dir}/home`);
  return { dir, file: r.path, hash: r.hash, home: `${dir}/home` };
}

async function sh(argv: string[], home: string): Promise<string[]> {
  const o = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    clearEnv: true,
    // A user's cache (root would use /var/cache/cortexfs): CORTEXFS_CACHE says where, here.
    env: { HOME: home, PATH: "/usr/bin:/bin", CORTEXFS_CACHE: `${home}/cache` },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!o.success) throw new Error(new TextDecoder().decode(o.stderr));
  return new TextDecoder().decode(o.stdout).trimEnd().split("\n");
}

Deno.test("the header runs the program named by argv[0] or the first argument, with that program's flags; any other name is cortexfs", async () => {
  // A new program is one more entry here (src/program/permissions.json in the build).
  const programs = {
    cortexfs: ["--allow-read"],
    ctx: ["--allow-env", "--allow-net"],
    newprog: ["--allow-env=A,B"],
  };
  const { dir, file, hash, home } = await fake(programs);
  const lib = `${home}/cache/${hash}`;
  // CORTEXFS_SELF is the path the file was started by (self() resolves it: src/program/self_test.ts).
  const want = (name: string, args: string[], by = file) => [
    ...BUILT_RUN,
    ...programs[name as keyof typeof programs],
    `${lib}/${name}.js`,
    ...args,
    `SELF=${by}`,
  ];
  try {
    Deno.symlinkSync(file, `${dir}/newprog`);
    Deno.symlinkSync(file, `${dir}/other-name`);
    assertEquals(await sh([file, "ctx", "a b", "-x"], home), want("ctx", ["a b", "-x"]));
    assertEquals(
      await sh([`${dir}/newprog`, "ctx"], home),
      want("newprog", ["ctx"], `${dir}/newprog`),
    );
    assertEquals(
      await sh([`${dir}/other-name`, "newprog", "1"], home),
      want("newprog", ["1"], `${dir}/other-name`),
    );
    assertEquals(await sh([file, "install", "--prefix", "p"], home), [
      ...want("cortexfs", ["install", "--prefix", "p"]),
    ]);
    assertEquals(await sh([file], home), want("cortexfs", []));
    // A shared cache (CORTEXFS_CACHE) is 0755, its unpack sealed with the payload's hash.
    assertEquals((Deno.statSync(`${home}/cache`).mode ?? 0) & 0o777, 0o755);
    assertEquals(Deno.readTextFileSync(`${lib}/.sha256`), `${hash}\n`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
