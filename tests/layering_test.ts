/**
 * The layering of every folder of the checkout ("rooms": each `src/<x>`, `cli`, `packaging`,
 * `bench`, `tools`, and `tests`, the harness with its fixtures), read from the import graph of
 * their modules (`*_test.ts` files left out: a test may reach fixtures anywhere): no cycle between
 * rooms, no import outside the room's allowed list ({@link ALLOWED}), and none its README forbids
 * ("Must not import: `src/x`, ..., `cli/`."). Every src/ folder must say what it must not import.
 */
import { assertEquals } from "./assert.ts";

const here = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const SPEC = /(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g;
/** The top-level folders that hold modules; each `src/<x>` is a room of its own. */
const TOP = ["src", "cli", "packaging", "bench", "tools", "tests"];

/** The src rooms on disk. */
function srcRooms(): string[] {
  return [...Deno.readDirSync(`${here}/src`)].filter((e) => e.isDirectory).map((e) =>
    `src/${e.name}`
  ).sort();
}

/**
 * What each room may import, besides itself. Product code (src/*, cli) never imports packaging,
 * bench, tools or tests; packaging (the build) reads only what the built file needs to know of
 * the product; bench and the test harness may use any of the product. A new room, or a new edge
 * between rooms, is a line here (and must not be one its README forbids).
 */
function allowed(): Record<string, string[]> {
  const src = srcRooms();
  return {
    "src/abi": [],
    "src/sys": ["src/abi"],
    "src/program": ["src/abi"],
    "src/store": ["src/abi", "src/sys"],
    "src/sandbox": ["src/abi", "src/sys"],
    "src/policy": ["src/abi", "src/store"],
    "src/model": ["src/abi", "src/store", "src/sys"],
    "src/fuse": ["src/abi", "src/store", "src/sys"],
    "src/tool": ["src/abi", "src/policy", "src/program", "src/sandbox", "src/store", "src/sys"],
    "src/prompt": ["src/abi", "src/model", "src/store", "src/sys", "src/tool"],
    "src/term": ["src/abi", "src/program", "src/sandbox", "src/store", "src/sys", "src/tool"],
    "src/ctx": ["src/abi", "src/model", "src/program", "src/prompt", "src/store", "src/term"],
    // A run (the instance's side) knows nothing of the host process that starts it.
    "src/runtime": [
      ...["src/abi", "src/model", "src/prompt", "src/sandbox", "src/store", "src/sys", "src/tool"],
    ],
    // The host process: starts, admits, supervises and stops instances and terminal units.
    "src/host": ["src/abi", "src/runtime", "src/sandbox", "src/store", "src/sys", "src/term"],
    "cli": src,
    "packaging": ["src/abi", "src/program", "src/tool"],
    "bench": [...src, "packaging", "tests"],
    "tools": [],
    "tests": [...src, "cli", "packaging"],
  };
}

/** Every .ts module under `dir` (tests beside code excluded: they may reach fixtures anywhere). */
function modules(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory && !e.name.startsWith(".") && e.name !== "dist") out.push(...modules(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) out.push(p);
  }
  return out;
}

/** The room a path belongs to: `src/<x>`, or its top-level folder; null outside every room. */
function roomOf(path: string): string | null {
  const rel = path.slice(here.length + 1);
  const m = /^src\/([^/]+)\//.exec(rel);
  if (m) return `src/${m[1]}`;
  const top = rel.split("/")[0];
  return rel.includes("/") && TOP.includes(top) ? top : null;
}

/** Room → room → the first import that makes the edge (for the failure message). */
export function folderGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of TOP.flatMap((d) => modules(`${here}/${d}`))) {
    const from = roomOf(file)!;
    const text = Deno.readTextFileSync(file);
    for (const m of text.matchAll(SPEC)) {
      const target = new URL(m[1], `file://${file}`).pathname;
      const to = roomOf(target) ?? target.slice(here.length + 1);
      if (to === from) continue;
      const edges = graph.get(from) ?? new Map<string, string>();
      if (!edges.has(to)) edges.set(to, `${file.slice(here.length + 1)} imports ${m[1]}`);
      graph.set(from, edges);
    }
  }
  return graph;
}

/** Each cycle found by a depth-first walk, as the room path that closes it. */
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

/** Every edge of `graph` that its room's allowed list does not name (a room with none: all). */
function outside(
  graph: Map<string, Map<string, string>>,
  rules: Record<string, string[]>,
): string[] {
  const faults: string[] = [];
  for (const [from, edges] of graph) {
    const ok = rules[from];
    for (const [to, why] of edges) {
      if (!ok?.includes(to)) faults.push(`${from} may not import ${to}: ${why}`);
    }
  }
  return faults.sort();
}

/** The rooms a README's "Must not import:" sentence names (`src/x`, `cli/` → cli). */
function forbidden(readme: string): string[] | null {
  const text = readme.replace(/\n(?!\n)/g, " ");
  const m = /Must not import:([^.]*(?:\.\w[^.]*)*?)(?:\.\s|\.$)/.exec(text);
  if (!m) return null;
  return [...m[1].matchAll(/`([^`]+)`/g)].map((t) => t[1].replace(/\/$/, ""));
}

Deno.test("every folder of the checkout with modules is a room with a rule, and every rule a room", () => {
  const onDisk = new Set(srcRooms());
  for (const top of TOP.filter((t) => t !== "src")) {
    if (modules(`${here}/${top}`).length) onDisk.add(top);
  }
  const stray = [...Deno.readDirSync(here)]
    .filter((e) => e.isDirectory && !e.name.startsWith(".") && e.name !== "dist")
    .filter((e) => !TOP.includes(e.name) && modules(`${here}/${e.name}`).length)
    .map((e) => e.name);
  assertEquals(stray, [], "folders with modules that no room covers");
  assertEquals([...onDisk].sort(), Object.keys(allowed()).sort());
});

Deno.test("rooms import each other without a cycle", () => {
  const found = cycles(folderGraph()).map((c) => c.join(" -> "));
  assertEquals(found, [], `room cycles: ${found.join("; ")}`);
});

Deno.test("every room imports only the rooms its rule allows", () => {
  assertEquals(outside(folderGraph(), allowed()), []);
});

Deno.test("no room imports or allows what its README forbids, and every src folder says what that is", () => {
  const graph = folderGraph();
  const rules = allowed();
  const faults: string[] = [];
  for (const room of [...srcRooms(), "packaging"]) {
    let readme = "";
    try {
      readme = Deno.readTextFileSync(`${here}/${room}/README.md`);
    } catch { /* reported below */ }
    const no = forbidden(readme);
    if (!no) {
      faults.push(`${room}/README.md has no "Must not import:" line`);
      continue;
    }
    for (const [to, why] of graph.get(room) ?? []) {
      if (no.includes(to)) faults.push(`${room} must not import ${to}: ${why}`);
    }
    for (const to of rules[room] ?? []) {
      if (no.includes(to)) faults.push(`${room}'s rule allows ${to}, its README forbids it`);
    }
  }
  assertEquals(faults, []);
});

Deno.test("the layering check sees a planted cycle, a planted edge outside the rule, a planted forbidden import", () => {
  // The checks themselves, on known graphs: a check that cannot fail proves nothing.
  const g = new Map([
    ["a", new Map([["b", "x"]])],
    ["b", new Map([["c", "y"]])],
    ["c", new Map([["a", "z"]])],
  ]);
  assertEquals(cycles(g), [["a", "b", "c", "a"]]);
  assertEquals(outside(g, { a: ["b"], b: ["c"], c: [] }), ["c may not import a: z"]);
  assertEquals(outside(g, { a: ["b"], b: ["c"] }), ["c may not import a: z"]);
  assertEquals(forbidden("Must not import: `src/fuse`, `cli/`. FFI only\nthrough `src/sys`."), [
    "src/fuse",
    "cli",
  ]);
  assertEquals(forbidden("no such line"), null);
});
