import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { readSecret, secretPath, writeSecret } from "./secret.ts";

Deno.test("writeSecret() stores 0600 under 0711 levels by atomic replace; readSecret() reads it back", async () => {
  const tmp = await Deno.makeTempDir();
  const root = `${tmp}/secrets`;
  try {
    const path = writeSecret("openai", "default", { key: "sk-one\n", root });
    assertEquals(path, `${root}/provider/openai/default`);
    assertEquals(Deno.readTextFileSync(path), "sk-one\n");
    const modes = [root, `${root}/provider`, `${root}/provider/openai`, path].map((p) =>
      (Deno.statSync(p).mode ?? 0) & 0o777
    );
    assertEquals(modes, [0o711, 0o711, 0o711, 0o600]);
    writeSecret("openai", "default", { key: "sk-two", root });
    assertEquals(readSecret("openai", "default", root), "sk-two");
    assertEquals(readSecret("openai", "other", root), undefined);
    // A key others can read is refused, not used.
    Deno.chmodSync(path, 0o644);
    assertEquals(
      assertThrows(() => readSecret("openai", "default", root), CtxError).errno,
      "EACCES",
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("secret names and keys are checked: EINVAL for a path-like provider, a multi-line or empty key", () => {
  for (const p of ["..", "a/b", "A", ""]) {
    assertEquals(assertThrows(() => secretPath(p, "default", "/x"), CtxError).errno, "EINVAL");
  }
  for (const key of ["", "a\nb", "has space"]) {
    const e = assertThrows(
      () => writeSecret("p", "default", { key, root: "/nonexistent" }),
      CtxError,
    );
    assertEquals(e.errno, "EINVAL");
  }
});
