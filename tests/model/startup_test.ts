/** Start-up cost: `ctx` (status, ls, every command) never loads the AI SDK; the daemon loads it only inside the driver. */
import { assertEquals } from "../assert.ts";
import { DENO, REPO } from "../fixture/mod.ts";

/** Every module specifier `deno info` finds from `entry`, dynamic imports included. */
async function graph(entry: string): Promise<string[]> {
  const out = await new Deno.Command(DENO, {
    args: ["info", "--json", `--config=${REPO}/deno.json`, `${REPO}/${entry}`],
    stdout: "piped",
    stderr: "null",
  }).output();
  assertEquals(out.code, 0);
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string }[];
  };
  return info.modules.map((m) => m.specifier);
}

const sdk = (s: string) => /^npm:\/(ai|@ai-sdk\/[^@]+)@/.test(s);

Deno.test("ctx's whole module graph (static and dynamic imports) has no AI SDK module and no driver", async () => {
  const mods = await graph("cli/ctx.ts");
  assertEquals(mods.filter(sdk), []);
  assertEquals(
    mods.filter((s) => /\/src\/model\/(openai|responses|anthropic|sdk)\.ts$/.test(s)),
    [],
  );
});

Deno.test("the daemon reaches the AI SDK only through the drivers' dynamic imports", async () => {
  const mods = await graph("cli/cortexfsd.ts");
  assertEquals(mods.filter(sdk).map((s) => s.replace(/@[\d.]+$/, "")).sort(), [
    "npm:/@ai-sdk/anthropic",
    "npm:/@ai-sdk/openai",
    "npm:/@ai-sdk/openai-compatible",
    "npm:/ai",
  ]);
  // No static import of the SDK anywhere in src/: the drivers name it only in import() calls.
  const named: string[] = [];
  const walk = (d: string) => {
    for (const e of Deno.readDirSync(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) walk(p);
      else if (
        p.endsWith(".ts") && /from\s+["'](ai|@ai-sdk\/[^"']+)["']/.test(Deno.readTextFileSync(p))
      ) {
        named.push(p);
      }
    }
  };
  walk(`${REPO}/src`);
  assertEquals(named, []);
});
