/** `deno task bench`: runs every bench/<area>/main.ts in turn; each prints its own ratios. */
const here = new URL(".", import.meta.url).pathname;
const only = Deno.args;
const areas = [...Deno.readDirSync(here)]
  .filter((e) => e.isDirectory && (only.length === 0 || only.includes(e.name)))
  .map((e) => e.name)
  .sort();
let failed = 0;
for (const area of areas) {
  const main = `${here}${area}/main.ts`;
  try {
    Deno.statSync(main);
  } catch {
    continue;
  }
  console.log(`== bench/${area}`);
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", main],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) failed++;
}
Deno.exit(failed ? 1 : 0);
