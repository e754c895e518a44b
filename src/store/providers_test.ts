import { readHostConfig } from "./providers.ts";
import { assertEquals } from "../../tests/assert.ts";

Deno.test("readHostConfig() keeps the valid files, names each ignored one, skips other names", () => {
  const dir = Deno.makeTempDirSync({ prefix: "ctx-providers-" });
  try {
    Deno.writeTextFileSync(
      `${dir}/openai.json`,
      JSON.stringify({ models: ["gpt-4o"], model_limits: { "gpt-4o": 100000 } }),
    );
    Deno.writeTextFileSync(`${dir}/bad.json`, "{ nope");
    Deno.mkdirSync(`${dir}/dir.json`);
    Deno.writeTextFileSync(`${dir}/README`, "not a provider file");
    const c = readHostConfig(dir);
    assertEquals(c.providers, {
      openai: { name: "openai", models: ["gpt-4o"], limits: { "gpt-4o": 100000 }, enabled: true },
    });
    assertEquals(c.errors.length, 2);
    assertEquals(c.errors[0].startsWith(`${dir}/bad.json ignored: "bad.json": not JSON: `), true);
    assertEquals(c.errors[1], `${dir}/dir.json ignored: not a regular file`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("readHostConfig() of a missing directory is no configuration and no error", () => {
  assertEquals(readHostConfig("/nonexistent/cortexfs/providers.d"), {
    dir: "/nonexistent/cortexfs/providers.d",
    providers: {},
    errors: [],
  });
});
