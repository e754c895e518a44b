/**
 * The folder layering of src/, read from the import graph: no cycle between folders, and no
 * import a folder's README forbids ("Must not import: `src/x`, ..., `cli/`."). Every src/ folder
 * must say what it must not import.
 */
import { assertEquals } from "./assert.ts";

const here = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const SPEC = /(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g;

/** Every .ts module under `dir` (tests beside code excluded: they may reach fixtures anywhere). */
function modules(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...modules(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) out.push(p);
  }
  return out;
}

/** The folder a path belongs to: `src/<x>` → x, `cli/...` → `cli`, anything else → null. */
function folderOf(path: string): string | null {
  const rel = path.slice(here.length + 1);
  const m = /^src\/([^/]+)\//.exec(rel);
  if (m) return m[1];
  return rel.startsWith("cli/") ? "cli" : null;
}

/** Folder → folder → the first import that makes the edge (for the failure message). */
export function folderGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of modules(`${here}/src`)) {
    const from = folderOf(file)!;
    const text = Deno.readTextFileSync(file);
    for (const m of text.matchAll(SPEC)) {
      const target = new URL(m[1], `file://${file}`).pathname;
      const to = folderOf(target);
      if (to === null || to === from) continue;
      const edges = graph.get(from) ?? new Map<string, string>();
      if (!edges.has(to)) edges.set(to, `${file.slice(here.length + 1)} imports ${m[1]}`);
      graph.set(from, edges);
    }
  }
  return graph;
}

/** Each cycle found by a depth-first walk, as the folder path that closes it. */
function cycles(graph: Map<string, Map<string, string>>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const walk = (node: string, path: string[]) => {
    state.set(node, "open");
    for (const next of graph.get(node)?.keys() ?? []) {
      if (state.get(next) === "open") found.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) walk(next, [...path, next]);
    }
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) walk(node, [node]);
  return found;
}

/** The folders a README's "Must not import:" sentence names (`src/x` → x, `cli/` → cli). */
function forbidden(readme: string): string[] | null {
  const text = readme.replace(/\n(?!\n)/g, " ");
  const m = /Must not import:([^.]*(?:\.\w[^.]*)*?)(?:\.\s|\.$)/.exec(text);
  if (!m) return null;
  return [...m[1].matchAll(/`([^`]+)`/g)].map((t) => t[1].replace(/^src\//, "").replace(/\/$/, ""));
}

Deno.test("src/ folders import each other without a cycle", () => {
  const found = cycles(folderGraph()).map((c) => c.join(" -> "));
  assertEquals(found, [], `folder cycles: ${found.join("; ")}`);
});

Deno.test("no folder imports what its README forbids, and every folder says what that is", () => {
  const graph = folderGraph();
  const faults: string[] = [];
  for (const e of [...Deno.readDirSync(`${here}/src`)].filter((e) => e.isDirectory)) {
    let readme = "";
    try {
      readme = Deno.readTextFileSync(`${here}/src/${e.name}/README.md`);
    } catch { /* reported below */ }
    const no = forbidden(readme);
    if (!no) {
      faults.push(`src/${e.name}/README.md has no "Must not import:" line`);
      continue;
    }
    for (const [to, why] of graph.get(e.name) ?? []) {
      if (no.includes(to)) faults.push(`src/${e.name} must not import ${to}: ${why}`);
    }
  }
  assertEquals(faults, []);
});

Deno.test("the layering check sees a planted cycle and a planted forbidden import", () => {
  // The walk itself, on a graph with a known cycle: a check that cannot fail proves nothing.
  const g = new Map([
    ["a", new Map([["b", "x"]])],
    ["b", new Map([["c", "y"]])],
    ["c", new Map([["a", "z"]])],
  ]);
  assertEquals(cycles(g), [["a", "b", "c", "a"]]);
  assertEquals(forbidden("Must not import: `src/fuse`, `cli/`. FFI only\nthrough `src/sys`."), [
    "fuse",
    "cli",
  ]);
  assertEquals(forbidden("no such line"), null);
});
