import { assert, assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError } from "../abi/errno.ts";
import { MIN_RUN, readSecret, redact, secretPath, writeSecret } from "./secret.ts";

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

Deno.test("redact() hides the key echoed whole or in part: plain, JSON-escaped, URL-encoded, base64 at any alignment", () => {
  const key = 'sk-te"st/key+0123\\456789=';
  const b64 = (s: string) => btoa(s);
  const echoes = [
    `Incorrect API key provided: ${key}.`,
    `request {"auth":${JSON.stringify(key)}}`,
    `GET /v1?key=${encodeURIComponent(key)}&x=1`,
    `GET /v1?key=${encodeURIComponent(key).toLowerCase()}`,
    `basic ${b64(`user:${key}`)} bearer ${b64(key)} ${b64(`x${key}`)}`,
    `cut: ${key.slice(0, 12)}... and ${key.slice(-9)}`,
    `url-safe ${b64(`ab${key}`).replaceAll("+", "-").replaceAll("/", "_")}`,
  ];
  // Each form's text; of base64, the part that encodes only key bytes (one group in from each end).
  const forms = [key, JSON.stringify(key), encodeURIComponent(key)];
  for (const pre of ["", "x", "ab", "user:"]) forms.push(b64(pre + key).slice(8, -8));
  for (const text of echoes) {
    const out = redact(text, key);
    assert(out.includes("<redacted>"), out);
    for (const form of forms) {
      for (let i = 0; i + MIN_RUN <= form.length; i++) {
        const run = form.slice(i, i + MIN_RUN);
        assertEquals(out.includes(run), false, `${out} holds ${run}`);
      }
    }
  }
  const plain = "provider answered HTTP 401: Incorrect API key provided.";
  assertEquals(redact(plain, key), plain);
  assertEquals(redact("key abc and abcd", "abc"), "key <redacted> and <redacted>d");
  assertEquals(redact(plain, undefined), plain);
});
