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

/** The problems found so far, and the two ways to add one. */
class Problems {
  readonly out: CtxError[] = [];
  constructor(readonly dir: string) {}

  bad(path: string, rule: string, errno: "EINVAL" | "EIO" = "EINVAL") {
    this.out.push(new CtxError(errno, rule, { path }));
  }

  /** Runs `fn`; what it throws is a problem at `path` (or at the path the error names). */
  guard(path: string, fn: () => void) {
    try {
      fn();
    } catch (e) {
      this.out.push(
        e instanceof CtxError
          ? new CtxError(e.errno, e.message, { path: e.path ?? path })
          : new CtxError("EIO", String(e), { path }),
      );
    }
  }
}

/** Every problem of the tree at `dir`, as CtxErrors naming the ABI path and the rule; [] when valid. */
export function treeProblems(dir: string, options: ValidateOptions = {}): CtxError[] {
  const p = new Problems(dir);
  if (!rootShape(p)) return p.out; // the rest assumes the frozen shape
  if (options.bootstrap) {
    p.guard(BOOTSTRAP_PATH, () => {
      const b = readBootstrap(dir);
      if (options.treeVersion !== undefined && b.tree_version !== options.treeVersion) {
        p.bad(BOOTSTRAP_PATH, `tree_version ${b.tree_version}, expected ${options.treeVersion}`);
      }
    });
  }
  p.guard("agent", () => objects(p, "agent", "agent", AGENT_CONTROLS as Table));
  p.guard("tool", () => objects(p, "tool", "tool", TOOL_CONTROLS as Table));
  p.guard("model", () => providers(p));
  p.guard("home", () => homes(p));
  p.guard("shared", () => shared(p));
  return p.out;
}

/** The frozen root: exactly ROOT_ENTRIES, `status` a file and the rest directories. */
function rootShape(p: Problems): boolean {
  const root = entries(p.dir).map((e) => e.name);
  const want = [...ROOT_ENTRIES].sort();
  if (JSON.stringify(root) !== JSON.stringify(want)) {
    p.bad(
      "/",
      `root entries are [${root.join(" ")}], expected exactly [${ROOT_ENTRIES.join(" ")}]`,
    );
    return false;
  }
  if (!Deno.lstatSync(`${p.dir}/status`).isFile) p.bad("status", "not a regular file");
  for (const d of ROOT_ENTRIES.slice(1)) {
    if (!Deno.lstatSync(`${p.dir}/${d}`).isDirectory) p.bad(d, "not a directory");
  }
  return p.out.length === 0;
}

/** The objects of one kind in `rel`: each a regular file with its `.d`, or an alias. */
function objects(p: Problems, kind: "agent" | "tool" | "model", rel: string, table: Table) {
  const list = entries(`${p.dir}/${rel}`);
  const names = new Set(list.map((e) => e.name));
  for (const e of list) {
    const path = `${rel}/${e.name}`;
    if (kind === "tool" && e.name === "tsh.d") {
      // tsh is the routing shell, not a tool object: its .d holds only its cache config.
      tshControls(p, path);
      continue;
    }
    if (e.name.endsWith(".d")) {
      // A control dir without its entry is an interrupted creation: not an object yet.
      if (!names.has(e.name.slice(0, -2))) continue;
      if (!e.isDirectory) p.bad(path, "a .d control entry must be a directory");
      else controls(p, kind, path, table);
      continue;
    }
    if (e.name.endsWith(".sock")) {
      if (!e.isSymlink) p.bad(path, "a .sock entry in the storage tree must be a symlink alias");
      continue;
    }
    p.guard(path, () => checkName(e.name, { kind: kind === "model" ? "component" : kind }));
    if (e.isSymlink) continue; // an alias; its target is checked where it lives
    if (!e.isFile) p.bad(path, "an object entry must be a regular file");
    else if (!names.has(`${e.name}.d`)) p.bad(path, `object has no control directory ${path}.d`);
  }
}

function tshControls(p: Problems, rel: string) {
  for (const e of entries(`${p.dir}/${rel}`)) {
    const path = `${rel}/${e.name}`;
    if (e.name !== "config" || !e.isFile) p.bad(path, "tool/tsh.d holds only the file config");
    else p.guard(path, () => parseTshConfig(Deno.readTextFileSync(`${p.dir}/${path}`)));
  }
}

/** One object's control directory `rel`: known names, regular files, valid contents, none missing. */
function controls(p: Problems, kind: string, rel: string, table: Table) {
  const present = new Set<string>();
  for (const e of entries(`${p.dir}/${rel}`)) {
    const path = `${rel}/${e.name}`;
    if (e.name === "hooks" && e.isDirectory && kind !== "model") continue;
    const spec = table[e.name];
    if (!spec) {
      p.bad(path, `not a ${kind} control`);
      continue;
    }
    present.add(e.name);
    if (!e.isFile) {
      p.bad(path, "a control must be a regular file");
      continue;
    }
    p.guard(path, () => {
      const bytes = Deno.readFileSync(`${p.dir}/${path}`);
      spec.parse(dec.decode(bytes));
      // Writable controls also carry cross-file invariants (window vs the model's limit).
      if (spec.writable) checkControl(p.dir, path, bytes);
    });
  }
  for (const [name, spec] of Object.entries(table)) {
    if (spec.required && !present.has(name)) p.bad(`${rel}/${name}`, "required control is missing");
  }
}

/** `model/`: provider directories (each a folder of model objects) and alias symlinks. */
function providers(p: Problems) {
  for (const e of entries(`${p.dir}/model`)) {
    const path = `model/${e.name}`;
    p.guard(path, () => checkName(e.name, { kind: "component" }));
    if (e.isSymlink) {
      const target = Deno.readLinkSync(`${p.dir}/${path}`);
      if (!/^[^/]+\/[^/]+$/.test(target) || !safeIsFile(`${p.dir}/model/${target}`)) {
        p.bad(path, `alias target "${target}" is not a model of this tree`);
      }
    } else if (e.isDirectory) {
      objects(p, "model", path, MODEL_CONTROLS as Table);
    } else {
      p.bad(path, "model/ holds provider directories and alias symlinks only");
    }
  }
}

function homes(p: Problems) {
  for (const e of entries(`${p.dir}/home`)) {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(e.name) || Number(e.name) > 0xffffffff) {
      p.bad(`home/${e.name}`, "home entries are decimal uids");
    } else if (!e.isDirectory) p.bad(`home/${e.name}`, "not a directory");
  }
}

function shared(p: Problems) {
  for (const e of entries(`${p.dir}/shared`)) {
    p.guard(`shared/${e.name}`, () => checkName(e.name, { kind: "component" }));
    if (!e.isDirectory) p.bad(`shared/${e.name}`, "a shared space must be a directory");
  }
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
