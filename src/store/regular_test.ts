/** Regular-file-only opens: every other kind of name answers EIO with the path, at once. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { appendRecord, readRecords } from "./jsonl.ts";
import { checkRegular, readRegular } from "./regular.ts";

function mkfifo(path: string): void {
  const out = new Deno.Command("mkfifo", { args: [path] }).outputSync();
  assertEquals(out.code, 0);
}

/** `[errno, message names the path, message]` of what `fn` throws. */
function refused(fn: () => unknown, path: string): unknown[] {
  const e = assertThrows(fn, CtxError);
  return [e.errno, e.path, e.message.startsWith(`${path} is `)];
}

Deno.test("readRegular() reads regular files (at most max bytes) and answers undefined for a missing one", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/f`, "x".repeat(70_000));
    assertEquals(readRegular(`${dir}/f`)?.length, 70_000);
    assertEquals(new TextDecoder().decode(readRegular(`${dir}/f`, { max: 3 })), "xxx");
    assertEquals(readRegular(`${dir}/none`), undefined);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a FIFO, symlink, directory, socket or device is refused with EIO naming it, never waited on or followed", () => {
  const dir = Deno.makeTempDirSync();
  const l = Deno.listen({ transport: "unix", path: `${dir}/sock` });
  try {
    mkfifo(`${dir}/fifo`);
    Deno.writeTextFileSync(`${dir}/target`, "{}\n");
    Deno.symlinkSync(`${dir}/target`, `${dir}/link`);
    Deno.mkdirSync(`${dir}/dir`);
    const names = ["fifo", "link", "dir", "sock"].map((n) => `${dir}/${n}`);
    const all = [...names, "/dev/null"];
    assertEquals(
      all.map((p) => refused(() => readRegular(p), p)),
      all.map((p) => ["EIO", p, true]),
    );
    assertEquals(
      names.map((p) => refused(() => appendRecord(p, { a: 1 }), p)),
      names.map((p) => ["EIO", p, true]),
    );
    assertEquals(refused(() => readRecords(`${dir}/fifo`), `${dir}/fifo`), [
      "EIO",
      `${dir}/fifo`,
      true,
    ]);
    assertEquals(refused(() => checkRegular(`${dir}/fifo`), `${dir}/fifo`), [
      "EIO",
      `${dir}/fifo`,
      true,
    ]);
    // Nothing was written through the link, and each name is still what was planted.
    assertEquals(Deno.readTextFileSync(`${dir}/target`), "{}\n");
    assertEquals(
      [Deno.lstatSync(names[0]).isFifo, Deno.lstatSync(names[1]).isSymlink],
      [true, true],
    );
  } finally {
    l.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("checkRegular() accepts a regular or missing file, and with create makes it with the mode", () => {
  const dir = Deno.makeTempDirSync();
  try {
    checkRegular(`${dir}/none`);
    assertEquals(readRegular(`${dir}/none`), undefined);
    checkRegular(`${dir}/made`, { create: 0o600 });
    assertEquals(Deno.statSync(`${dir}/made`).mode! & 0o777, 0o600);
    checkRegular(`${dir}/made`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("syncDir() on a FIFO swapped in for a directory answers ENOTDIR at once (bounded: a child process)", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    mkfifo(`${dir}/d`);
    const atomic = new URL("./atomic.ts", import.meta.url).href;
    const code = `import { syncDir } from ${JSON.stringify(atomic)};
try { syncDir(${
      JSON.stringify(`${dir}/d`)
    }); console.log("synced"); } catch (e) { console.log(e.errno); }`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-lock", code],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(15_000), // a blocked open is killed, and the test fails
    }).output();
    assertEquals(new TextDecoder().decode(out.stdout).trim(), "ENOTDIR");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
