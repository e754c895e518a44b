/** Whole-tree validation of a generation: the frozen root, object pairs, every control's format. */
import { parseTshConfig } from "../abi/tshconfig.ts";
import { CtxError, ignore } from "../abi/errno.ts";
import { checkName, TEMP_NAME } from "../abi/names.ts";
import { AGENT_CONTROLS, MODEL_CONTROLS, TOOL_CONTROLS } from "../abi/controls.ts";
import { checkControl } from "./control.ts";
import { BOOTSTRAP_PATH, readBootstrap } from "./bootstrap.ts";
import { ROOT_ENTRIES } from "./tree.ts";

/** Names left by an interrupted atomic replace (`.<name>.tmp-<pid>-<nonce>`): never objects. */
export { TEMP_NAME };

/** Options for {@link treeProblems}. */
export interface ValidateOptions {
  /** Require `bin/cortexfs.bootstrap.json` (and, when given, this tree_version in it). */
  bootstrap?: boolean;
  treeVersion?: number;
}

type Table = Record<string, { parse(text: string): unknown; writable: boolean; required: boolean }>;

function entries(dir: string): Deno.DirEntry[] {
  return [...Deno.readDirSync(dir)].filter((e) => !TEMP_NAME.test(e.name)).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0
  );
}

const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Every problem of the tree at `dir`, as CtxErrors naming the ABI path and the rule; [] when valid. */
export function treeProblems(dir: string, options: ValidateOptions = {}): CtxError[] {
  const out: CtxError[] = [];
  const bad = (path: string, rule: string, errno: "EINVAL" | "EIO" = "EINVAL") =>
    out.push(new CtxError(errno, rule, { path }));
  const guard = (path: string, fn: () => void) => {
    try {
      fn();
    } catch (e) {
      out.push(
        e instanceof CtxError
          ? new CtxError(e.errno, e.message, { path: e.path ?? path })
          : new CtxError("EIO", String(e), { path }),
      );
    }
  };

  const root = entries(dir).map((e) => e.name);
  const want = [...ROOT_ENTRIES].sort();
  if (JSON.stringify(root) !== JSON.stringify(want)) {
    bad("/", `root entries are [${root.join(" ")}], expected exactly [${ROOT_ENTRIES.join(" ")}]`);
    return out; // the rest assumes the frozen shape
  }
  if (!Deno.lstatSync(`${dir}/status`).isFile) bad("status", "not a regular file");
  for (const d of ROOT_ENTRIES.slice(1)) {
    if (!Deno.lstatSync(`${dir}/${d}`).isDirectory) bad(d, "not a directory");
  }
  if (out.length) return out;

  if (options.bootstrap) {
    guard(BOOTSTRAP_PATH, () => {
      const b = readBootstrap(dir);
      if (options.treeVersion !== undefined && b.tree_version !== options.treeVersion) {
        bad(BOOTSTRAP_PATH, `tree_version ${b.tree_version}, expected ${options.treeVersion}`);
      }
    });
  }

  const objects = (kind: "agent" | "tool" | "model", rel: string, table: Table) => {
    const list = entries(`${dir}/${rel}`);
    const names = new Set(list.map((e) => e.name));
    for (const e of list) {
      const path = `${rel}/${e.name}`;
      if (kind === "tool" && e.name === "tsh.d") {
        // tsh is the routing shell, not a tool object: its .d holds only its cache config.
        tshControls(path);
        continue;
      }
      if (e.name.endsWith(".d")) {
        // A control dir without its entry is an interrupted creation: not an object yet.
        if (!names.has(e.name.slice(0, -2))) continue;
        if (!e.isDirectory) bad(path, "a .d control entry must be a directory");
        else controls(kind, path, table);
        continue;
      }
      if (e.name.endsWith(".sock")) {
        if (!e.isSymlink) bad(path, "a .sock entry in the storage tree must be a symlink alias");
        continue;
      }
      guard(path, () => checkName(e.name, { kind: kind === "model" ? "component" : kind }));
      if (e.isSymlink) continue; // an alias; its target is checked where it lives
      if (!e.isFile) bad(path, "an object entry must be a regular file");
      else if (!names.has(`${e.name}.d`)) bad(path, `object has no control directory ${path}.d`);
    }
  };

  const tshControls = (rel: string) => {
    for (const e of entries(`${dir}/${rel}`)) {
      const path = `${rel}/${e.name}`;
      if (e.name !== "config" || !e.isFile) bad(path, "tool/tsh.d holds only the file config");
      else guard(path, () => parseTshConfig(Deno.readTextFileSync(`${dir}/${path}`)));
    }
  };

  const controls = (kind: string, rel: string, table: Table) => {
    const present = new Set<string>();
    for (const e of entries(`${dir}/${rel}`)) {
      const path = `${rel}/${e.name}`;
      if (e.name === "hooks" && e.isDirectory && kind !== "model") continue;
      const spec = table[e.name];
      if (!spec) {
        bad(path, `not a ${kind} control`);
        continue;
      }
      present.add(e.name);
      if (!e.isFile) {
        bad(path, "a control must be a regular file");
        continue;
      }
      guard(path, () => {
        const bytes = Deno.readFileSync(`${dir}/${path}`);
        spec.parse(dec.decode(bytes));
        // Writable controls also carry cross-file invariants (window vs the model's limit).
        if (spec.writable) checkControl(dir, path, bytes);
      });
    }
    for (const [name, spec] of Object.entries(table)) {
      if (spec.required && !present.has(name)) bad(`${rel}/${name}`, "required control is missing");
    }
  };

  guard("agent", () => objects("agent", "agent", AGENT_CONTROLS as Table));
  guard("tool", () => objects("tool", "tool", TOOL_CONTROLS as Table));
  guard("model", () => {
    for (const e of entries(`${dir}/model`)) {
      const path = `model/${e.name}`;
      guard(path, () => checkName(e.name, { kind: "component" }));
      if (e.isSymlink) {
        const target = Deno.readLinkSync(`${dir}/${path}`);
        if (!/^[^/]+\/[^/]+$/.test(target) || !safeIsFile(`${dir}/model/${target}`)) {
          bad(path, `alias target "${target}" is not a model of this tree`);
        }
      } else if (e.isDirectory) {
        objects("model", path, MODEL_CONTROLS as Table);
      } else {
        bad(path, "model/ holds provider directories and alias symlinks only");
      }
    }
  });
  guard("home", () => {
    for (const e of entries(`${dir}/home`)) {
      if (!/^(0|[1-9][0-9]{0,9})$/.test(e.name) || Number(e.name) > 0xffffffff) {
        bad(`home/${e.name}`, "home entries are decimal uids");
      } else if (!e.isDirectory) bad(`home/${e.name}`, "not a directory");
    }
  });
  guard("shared", () => {
    for (const e of entries(`${dir}/shared`)) {
      guard(`shared/${e.name}`, () => checkName(e.name, { kind: "component" }));
      if (!e.isDirectory) bad(`shared/${e.name}`, "a shared space must be a directory");
    }
  });
  return out;
}

function safeIsFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory);
    return false;
  }
}

/** Throws EINVAL listing every problem when the tree at `dir` is not a valid generation. */
export function validateTree(dir: string, options: ValidateOptions = {}): void {
  const problems = treeProblems(dir, options);
  if (problems.length === 0) return;
  const lines = problems.map((p) => `  ${p.toString()}`).join("\n");
  throw new CtxError(
    problems[0].errno,
    `tree is invalid (${problems.length} problem(s)):\n${lines}`,
    { path: dir },
  );
}
