/** Test fixture: a real initial tree (update()) and a workspace with .git, removed in cleanup. */
import { update } from "../../src/store/generation.ts";
import { replaceFile } from "../../src/store/atomic.ts";

/** One tree + workspace. */
export interface Fixture {
  storage: string;
  /** Host path of the tree (`<storage>/current`, resolved). */
  root: string;
  /** Workspace (with `.git/`), world-writable so any agent uid can use it. */
  ws: string;
  /** Replaces `agent/coder.d/<control>`. */
  set(control: string, text: string): void;
  cleanup(): Promise<void>;
}

/** Builds a fresh tree owned by the caller, readable by any uid (agents may run as non-root). */
export async function fixture(): Promise<Fixture> {
  const storage = await Deno.makeTempDir({ prefix: "cortexfs-tool-" });
  await Deno.chmod(storage, 0o755);
  update(storage);
  const root = Deno.realPathSync(`${storage}/current`);
  const ws = await Deno.makeTempDir({ prefix: "cortexfs-ws-" });
  await Deno.chmod(ws, 0o777);
  await Deno.mkdir(`${ws}/.git`);
  await Deno.writeTextFile(`${ws}/.git/HEAD`, "ref: refs/heads/main\n");
  await Deno.writeTextFile(`${ws}/hello.txt`, "hello\n");
  return {
    storage,
    root,
    ws,
    set(control, text) {
      replaceFile(`${root}/agent/coder.d/${control}`, text);
    },
    async cleanup() {
      await Deno.remove(storage, { recursive: true }).catch(() => {});
      await Deno.remove(ws, { recursive: true }).catch(() => {});
    },
  };
}

/**
 * Adds an ordinary executable tool object `<dir>/<name>` + `.d/` (every required control) with a
 * policy allowing coder_t. `dir` defaults to the system tier `<root>/tool`.
 */
export function addTool(root: string, name: string, script: string, dir = `${root}/tool`): void {
  Deno.mkdirSync(`${dir}/${name}.d`, { recursive: true });
  replaceFile(`${dir}/${name}.d/name`, `${name}\n`);
  replaceFile(`${dir}/${name}.d/description`, `test tool ${name}\n`);
  replaceFile(`${dir}/${name}.d/schema`, `{"type":"object"}\n`);
  replaceFile(`${dir}/${name}.d/cap`, "");
  replaceFile(`${dir}/${name}.d/policy`, `allow coder_t tool:${name} execute\n`);
  replaceFile(`${dir}/${name}`, script, { mode: 0o755 });
}

/** Appends `line` to `agent/coder.d/policy`. */
export function grant(f: Fixture, line: string): void {
  f.set("policy", Deno.readTextFileSync(`${f.root}/agent/coder.d/policy`) + line);
}
