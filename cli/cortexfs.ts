/**
 * cortexfs: the multi-call entry. `cortexfs PROGRAM ARGS...` runs one of the programs (`ctx`,
 * `tsh`, `ctxterm`, `cortexfsd`: the keys of src/program/permissions.json that this install has)
 * with its own permission set; `cortexfs install` links them into a bin directory. The built
 * file's header dispatches programs itself (it also answers to the names of its symlinks) and
 * runs this entry only for what is not a program.
 */
import { Command, CommanderError } from "commander";
import { EXIT, exitCode, ignore, toCtxError } from "../src/abi/errno.ts";
import { VERSION } from "../src/abi/version.ts";
import { install } from "../src/program/install.ts";
import { programArgv, self } from "../src/program/self.ts";

const env = Deno.env.toObject();
const here = self(env);
const programs = here.programs.filter((n) => n !== "cortexfs");

/** Runs program `name` of this install with `args`, its stdio ours; resolves to its exit code. */
async function run(name: string, args: string[]): Promise<number> {
  const [cmd, ...rest] = programArgv(here, name, args);
  const child = new Deno.Command(cmd, { args: rest, stdin: "inherit" }).spawn();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => child.kill(sig)); // the program decides what a signal means
  }
  return (await child.status).code; // 128 + N when a signal N ended it
}

const program = new Command("cortexfs")
  .description(
    `CortexFS ${VERSION}: one file, several programs. Run one as \`cortexfs PROGRAM ...\`, or ` +
      "through a symlink of its name (`cortexfs install` makes them).",
  )
  .version(`cortexfs ${VERSION}`, "-V, --version", "print the version")
  .addHelpText(
    "after",
    `
Programs: ${programs.join(", ")}

Examples:
  sudo cortexfs cortexfsd                       serve /ctx (storage built on first run)
  cortexfs cortexfsd --storage S --mount M --run R   the same, state where you say
  cortexfs ctx status                           which tree, its agents and tools
  sudo cortexfs install --service               cortexfs, ctx, ... into /usr/local/bin + a unit
  cortexfs install --prefix ~/bin               the same for one user (default ~/.local/bin)`,
  )
  .enablePositionalOptions() // what follows a program's name is that program's
  .exitOverride();

program
  .command("install")
  .description("copy this file to PREFIX/cortexfs, link the programs to it, add agent.sh")
  .option("--prefix <dir>", "bin directory (default /usr/local/bin for root, else ~/.local/bin)")
  .option("--service", "also write a systemd unit for cortexfsd (written, never started)")
  .option("--unit-dir <dir>", "where the unit goes", "/etc/systemd/system")
  .action((o: { prefix?: string; service?: boolean; unitDir: string }) => {
    if (here.kind !== "built" || !here.exe) {
      console.error(
        "cortexfs: install copies the built file: run `deno task build`, then " +
          `dist/cortexfs-${VERSION}-linux-x86_64 install`,
      );
      Deno.exitCode = EXIT.usage;
      return;
    }
    const prefix = o.prefix ??
      (Deno.uid() === 0 ? "/usr/local/bin" : `${env.HOME ?? "."}/.local/bin`);
    let files: { name: string; src: string }[] = [];
    try {
      if (Deno.statSync(`${here.lib}/agent.sh`).isFile) {
        files = [{ name: "agent.sh", src: `${here.lib}/agent.sh` }];
      }
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* a build without agent.sh */
    }
    const r = install({
      exe: here.exe,
      programs,
      files,
      prefix,
      service: o.service,
      unitDir: o.unitDir,
    });
    for (const l of r.lines) console.log(l);
  });

for (const name of programs) {
  program
    .command(name, { hidden: false })
    .description(`run ${name} (its own permission set)`)
    .helpOption(false)
    .passThroughOptions()
    .allowUnknownOption()
    .allowExcessArguments()
    .argument("[args...]")
    .action(async (args: string[]) => {
      Deno.exitCode = await run(name, args);
    });
}

try {
  await program.parseAsync(Deno.args, { from: "user" });
} catch (e) {
  if (e instanceof CommanderError) {
    Deno.exitCode = e.exitCode === 0 ? EXIT.ok : EXIT.usage;
  } else {
    const err = toCtxError(e);
    console.error(`cortexfs: ${err}`);
    Deno.exitCode = exitCode(err.errno);
  }
}
