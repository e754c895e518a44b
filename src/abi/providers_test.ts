import { parseProvider, providerOfFile } from "./providers.ts";
import { CtxError } from "./errno.ts";
import { assertEquals } from "../../tests/assert.ts";

const parse = (v: unknown, file = "local.json") =>
  parseProvider(typeof v === "string" ? v : JSON.stringify(v), file);

/** The errno and message a bad file gives. */
function fault(v: unknown, file?: string): [string, string] {
  try {
    parse(v, file);
  } catch (e) {
    if (e instanceof CtxError) return [e.errno, e.message];
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(v)}`);
}

Deno.test("parseProvider() accepts the reference keys and keeps limits by native id", () => {
  assertEquals(
    parse({
      name: "local",
      base_url: "http://127.0.0.1:11434/v1/",
      default_model: "llama3.1:8b",
      models: ["qwen2.5:7b"],
      model_limits: { "llama3.1:8b": 131072, "qwen2.5:7b": 32768 },
      enabled: true,
    }),
    {
      name: "local",
      base_url: "http://127.0.0.1:11434/v1",
      default_model: "llama3.1:8b",
      models: ["qwen2.5:7b"],
      limits: { "llama3.1:8b": 131072, "qwen2.5:7b": 32768 },
      enabled: true,
    },
  );
  assertEquals(parse({}), { name: "local", models: [], limits: {}, enabled: true });
  assertEquals(parse({ enabled: false }).enabled, false);
});

Deno.test("parseProvider() refuses a bad file naming the file and the rule", () => {
  const table: [unknown, string, string?][] = [
    ["{", `"local.json": not JSON: `],
    [[], `"local.json": not a JSON object`],
    [{ name: "other" }, `"local.json": "name" "other" is not the file's provider "local"`],
    [{ api_key_env: "X" }, `"local.json": unknown key "api_key_env" (keys: name, base_url, `],
    [{ oauth: {} }, `"local.json": "oauth" is not supported (keys come from \`ctx provider set\`)`],
    [{ formats: ["chat"] }, `"local.json": "formats" is not supported (the model's driver`],
    [{ base_url: "ftp://x" }, `"local.json": "base_url": base_url "ftp://x" is not http(s)`],
    [{ base_url: "http://u:p@x" }, `has credentials, a query or a hash`],
    [{ models: "a" }, `"local.json": "models" must be an array of model ids`],
    [{ models: ["a", "a"] }, `"local.json": "models" lists "a" twice`],
    [{ models: ["a b"] }, `"local.json": "models"[0] "a b" is not 1-256 printable ASCII`],
    [
      { model_limits: { a: 1 } },
      `"model_limits" names "a", which is not default_model or in models`,
    ],
    [
      { models: ["a"], model_limits: { a: 0 } },
      `"model_limits" "a": 0 is not a token count 1..4294967295`,
    ],
    [{ models: ["a"], model_limits: { a: 4294967296 } }, `4294967296 is not a token count`],
    [{ models: ["a"], model_limits: { a: 1.5 } }, `1.5 is not a token count`],
    [{ models: ["a"], model_limits: { a: "8" } }, `"8" is not a token count`],
    [{ model_limits: [] }, `"model_limits" must be an object of model id -> token count`],
    [{ enabled: "yes" }, `"enabled" must be true or false`],
    [{}, `"Local.json": the file name must be <provider>.json`, "Local.json"],
  ];
  for (const [v, message, file] of table) {
    const [errno, got] = fault(v, file);
    assertEquals([errno, got.startsWith(message) || got.includes(message)], ["EINVAL", true], got);
  }
  assertEquals(fault("x".repeat(70000))[0], "EMSGSIZE");
});

Deno.test("providerOfFile() takes <provider>.json names only", () => {
  assertEquals(
    ["openai.json", "api.lmm.best.json", "notes.txt", ".openai.json.swp", "A.json", ".json"].map(
      providerOfFile,
    ),
    ["openai", "api.lmm.best", null, null, null, null],
  );
});
