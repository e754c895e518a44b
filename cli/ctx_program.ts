/** `ctx`'s full argument parser (commander): every command, help and usage error; cli/ctx.ts starts it. */
import { Command, CommanderError } from "commander";
import {
  addAgentCommands,
  cat,
  findTree,
  type FoundTree,
  guarded,
  ls,
  NoTreeError,
  set,
  status,
  storageUpdate,
  TERMINAL_HELP,
  why,
} from "../src/ctx/mod.ts";
import { EXIT, ignore } from "../src/abi/errno.ts";
import { VERSION } from "../src/abi/version.ts";
import { resolvePaths } from "../src/store/paths.ts";

/** What cli/ctx.ts found out before handing over: the environment and the checkout, if any. */
export interface Start {
  env: Record<string, string>;
  /** The checkout ctx runs from (its dev mount is looked for), undefined in the built file. */
  checkout?: string;
}

/** How the commands reach the tree (found once, on first use) and the provider secrets. */
interface Access {
  env: Record<string, string>;
  tree: () => FoundTree;
  root: () => string;
  /** Where provider keys live. */
  secrets: () => string;
}

/** The tree from `--root`/CTX_ROOT/the mounts, found on first use; where the secrets are. */
function access(program: Command, start: Start): Access {
  const { env, checkout } = start;
  let found: FoundTree | undefined;
  const tree = () => found ??= findTree({ root: program.opts().root, env, checkout });
  const root = () => tree().root;
  // Where provider keys live: CORTEXFS_SECRETS, else the checkout's .dev/secrets when ctx works
  // on the dev tree (cortexfsd --dev reads them there), else the host's store.
  const secrets = () => {
    let dev: string | undefined;
    try {
      if (checkout && tree().via === "dev") dev = checkout;
    } catch (e) {
      ignore(e, NoTreeError); /* no tree: the host's store */
    }
    return resolvePaths({ dev, env }).secrets;
  };
  return { env, tree, root, secrets };
}

const EXAMPLES = `
Examples:
  ctx status                                  which tree, its state, agents and tools
  ctx agent send coder "hello"                one message, the answer streamed
  ctx agent chat coder                        interactive chat (Ctrl+C cancels a run)
  ctx agent new mine --model debug/echo       a new agent of your own
  ctx cat agent/coder.d/window                read a control
  ctx set agent/coder.d/window 4096           write one, validated
  ctx why agent/coder.d/window                why your last write of it was refused
  ctx agent history coder                     the runs of a session
  ctx model new local/llama --driver openai-chat --base-url http://127.0.0.1:11434/v1
                                              a model for a provider (root)

The tree is --root, else CTX_ROOT, else the first live mount of /ctx and this checkout's
.dev/ctx (\`sudo tools/deno task dev\`). Exit codes: 0 ok, 1 failed, 2 usage or invalid input,
13 access denied, 69 unavailable (no mount found, daemon gone), 70 internal error.`;

/** The program itself: its description, global options and the one error format. */
function describe(program: Command): void {
  program
    .description("CortexFS human CLI: inspect and edit the tree (default: the mount at /ctx)")
    .version(`ctx ${VERSION}`, "-V, --version", "print the version")
    .option("-r, --root <path>", "the tree to work on (overrides CTX_ROOT)")
    .addHelpText("after", EXAMPLES)
    .showHelpAfterError(false)
    .exitOverride()
    .configureOutput({
      // Usage errors print in the one error format: `ctx: EINVAL: <command>: <message>`.
      outputError: (msg, write) =>
        write(`ctx: EINVAL: ctx: ${msg.replace(/^error: /, "").trim()}\n`),
    });
}

/** status, ls, cat, set, why, validate-name: reading and editing the tree. */
function addTreeCommands(program: Command, { tree, root }: Access): void {
  program
    .command("status")
    .description("print the tree's status (the default command)")
    .action(() => guarded("status", () => console.log(status(tree()).join("\n"))));

  program
    .command("ls")
    .description("list a directory of the tree (readdir only)")
    .argument("[path]", "ABI path (agent, /ctx/model/debug, ...)", "")
    .action((path: string) =>
      guarded(path || "/", () => {
        const names = ls(root(), path);
        if (names.length) console.log(names.join("\n"));
      })
    );

  program
    .command("cat")
    .description("print a file of the tree")
    .argument("<path>", "ABI path")
    .action((path: string) =>
      guarded(path, () => {
        const bytes = cat(root(), path);
        for (let off = 0; off < bytes.length;) off += Deno.stdout.writeSync(bytes.subarray(off));
      })
    );

  program
    .command("set")
    .description("replace a control file atomically after validating it (- reads VALUE from stdin)")
    .argument("<path>", "ABI path of a control, e.g. agent/coder.d/window")
    .argument("<value>", "the new value; one-value controls get their final newline")
    .action((path: string, value: string) =>
      guarded(path, () =>
        set(root(), {
          path,
          value,
          stdin: async () => new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer()),
        }))
    );

  program
    .command("why")
    .description("why your last write of a control through the mount was refused")
    .argument("<path>", "ABI path of a control, e.g. agent/coder.d/window")
    .action((path: string) =>
      guarded(path, async () => {
        Deno.stdout.writeSync(new TextEncoder().encode(await why(root(), path)));
      })
    );

  program
    .command("validate-name")
    .description("check an object name against the ABI grammar (exit 0 valid, 2 invalid)")
    .argument("<name>", "name to check")
    .option(
      "--kind <kind>",
      "agent, tool, model (provider/model or alias) or component",
      "component",
    )
    .action((name: string, o: { kind: string }) =>
      guarded(name, async () => {
        const { checkName } = await import("../src/abi/names.ts");
        if (!["agent", "tool", "model", "component"].includes(o.kind)) {
          const { CtxError } = await import("../src/abi/errno.ts");
          throw new CtxError("EINVAL", `--kind "${o.kind}" is not agent, tool, model or component`);
        }
        checkName(name, { kind: o.kind as "agent" });
      })
    );
}

/** `storage update`. */
function addStorage(program: Command, { env }: Access): void {
  program
    .command("storage")
    .description("storage generations")
    .command("update")
    .description("bring the storage tree to this binary's tree_version")
    .option(
      "--storage <dir>",
      "storage root (default: CORTEXFS_STORAGE or /var/lib/cortexfs/storage)",
    )
    .option("--check", "exit 1 when an update is needed, 0 when up to date; write nothing")
    .option("--dry-run", "print what would be done; write nothing")
    .option("--prune", "remove every non-current generation and half-built leftovers")
    .action((o: { storage?: string; check?: boolean; dryRun?: boolean; prune?: boolean }) => {
      const storage = o.storage ?? resolvePaths({ env }).storage;
      return guarded(storage, () => storageUpdate({ ...o, storage, env }));
    });
}

/** `provider set`. */
function addProvider(program: Command, { env, secrets }: Access): void {
  program
    .command("provider")
    .description("provider secrets, kept on the host only")
    .command("set")
    .description("store NAME's API key (0600) from stdin, or from --env VAR; never from argv")
    .argument("<name>", "provider name (the <provider> of model/<provider>/<model>)")
    .option("--slot <slot>", "secret slot", "default")
    .option("--env <var>", "read the key from this environment variable instead of stdin")
    .action((name: string, o: { slot: string; env?: string }) =>
      guarded(name, async () => {
        const { providerSet } = await import("../src/ctx/provider.ts");
        console.log(
          await providerSet({
            name,
            slot: o.slot,
            envVar: o.env,
            env,
            root: secrets(),
            stdin: async () =>
              new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer()),
          }),
        );
      })
    );
}

/** `model new` and `model list`. */
function addModel(program: Command, args: readonly string[], { root, secrets }: Access): void {
  const model = program
    .command("model")
    .description("model objects: make one for a provider (root), list them");
  model
    .command("new")
    .description(
      "make model/<provider>/<model> for a provider's API (root: in the tree the daemon serves)",
    )
    .argument("<model>", "<provider>/<model>, e.g. openai/gpt-4o-mini or local/llama")
    .requiredOption("--driver <driver>", "openai-chat, openai-responses or anthropic-messages")
    .option("--base-url <url>", "the API's base URL (openai-chat: required, e.g. <server>/v1)")
    .option("--id <native>", "the provider's model name (default: the <model> component)")
    .option("--limit <n>", "its context limit in tokens (default: host config, catalog, unknown)")
    .option("--fallback <model...>", "models tried, in order, when this one fails")
    .action((
      ref: string,
      o: { driver: string; baseUrl?: string; id?: string; limit?: string; fallback?: string[] },
    ) =>
      guarded(`model/${ref}`, async () => {
        const { modelNew } = await import("../src/ctx/model.ts");
        const lines = modelNew({
          root: root(),
          ref,
          ...o,
          secrets: secrets(),
          argv: ["ctx", ...args],
        });
        for (const l of lines) console.log(l);
      })
    );
  model
    .command("list")
    .description("every model: driver, base URL, the limit a run uses, whether a key is stored")
    .action(() =>
      guarded("model", async () => {
        const { modelList } = await import("../src/ctx/model.ts");
        for (const l of modelList(root(), secrets())) console.log(l);
      })
    );
}

/** `doctor`. */
function addDoctor(program: Command): void {
  program
    .command("doctor")
    .description("check that bubblewrap can create its namespaces here (exit 0 ok, 69 not)")
    .action(() =>
      guarded("bwrap", async () => {
        const { doctor } = await import("../src/sandbox/doctor.ts");
        const r = await doctor();
        console.log(r.message);
        if (!r.ok) Deno.exitCode = EXIT.unavailable;
      })
    );
}

/** `agent ...` and `terminal ...`: the socket client loads only when the command line names them. */
async function addSocketCommands(
  program: Command,
  args: readonly string[],
  { root, env }: Access,
): Promise<void> {
  addAgentCommands(
    program.command("agent").description("agent objects and sessions"),
    { root, env },
    // The socket client (node:net, zod frames) loads only for `ctx agent ...`: status/ls stay light.
    args.includes("agent")
      ? await Promise.all([
        import("../src/ctx/chat.ts"),
        import("../src/ctx/send.ts"),
        import("../src/ctx/history.ts"),
        import("../src/ctx/instance.ts"),
        import("../src/ctx/terminal.ts"),
      ]).then((ms) => ms.map((m) => m.register))
      : [],
  );

  if (args.includes("terminal")) {
    const { registerTerminal } = await import("../src/ctx/terminal.ts");
    registerTerminal(program, { root, env });
  } else {
    // Listed in `ctx --help` without loading the socket client; `ctx terminal ...` (and
    // `ctx help terminal`) registers the real command above.
    program.command("terminal").description(TERMINAL_HELP);
  }
}

/** Every command of `ctx`, registered on a new program (the socket ones only when `args` need them). */
async function ctxProgram(args: readonly string[], start: Start): Promise<Command> {
  const program = new Command("ctx");
  const a = access(program, start);
  describe(program);
  addTreeCommands(program, a);
  addStorage(program, a);
  addProvider(program, a);
  addModel(program, args, a);
  addDoctor(program);
  await addSocketCommands(program, args, a);
  return program;
}

/** Parses `args` (Deno.args) with commander and runs the command; sets the exit code. */
export async function main(args: readonly string[], start: Start): Promise<void> {
  const p = await ctxProgram(args, start);
  try {
    // No command at all means `ctx status` (spec-digest 9).
    await p.parseAsync(args.length ? [...args] : ["status"], { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      Deno.exitCode = e.exitCode === 0 ? EXIT.ok : EXIT.usage;
    } else throw e;
  }
}
