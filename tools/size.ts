/**
 * `deno run -R tools/size.ts [--max N] [dirs...]`: files and lines per folder, and every function
 * whose body spans more than N lines (default 80), so a structure note's before/after counts can
 * be reproduced. Product code only: `*_test.ts` files are left out. A function is a `function`
 * declaration or expression, a method, or an arrow with a block body; its length is from its
 * head's line to its closing brace's line. The reading is lexical (comments, strings, template
 * literals and regex literals blanked first), not a parse: good for counting, not for proof.
 */

const KEYWORDS = new Set([
  "if",
  "for",
  "while",
  "switch",
  "catch",
  "return",
  "await",
  "new",
  "function",
  "typeof",
  "super",
  "else",
  "do",
  "with",
  "yield",
  "throw",
  "void",
  "delete",
  "in",
  "of",
]);

/** Whether a `/` after `prev` (the last non-blank character, `word` the last word) opens a regex. */
function regexAt(prev: string, word: string): boolean {
  return prev === "" || "(,=:[!&|?{};+-*%<>~^".includes(prev) ||
    ["return", "typeof", "case", "in", "of", "yield", "await"].includes(word);
}

/** `text` with comments, strings and regex bodies blanked (newlines kept, so lines still count). */
export function blank(text: string): string {
  const out = text.split("");
  const wipe = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  const braces: number[] = []; // per open `${`: the brace depth inside it
  let i = 0;
  let prev = "";
  let word = "";
  const template = (start: number): number => {
    let k = start;
    while (k < text.length && text[k] !== "`") {
      if (text[k] === "\\") k++;
      else if (text[k] === "$" && text[k + 1] === "{") {
        wipe(start, k);
        braces.push(0);
        return k + 2;
      }
      k++;
    }
    wipe(start, k);
    return k + 1;
  };
  while (i < text.length) {
    const c = text[i];
    if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      wipe(i, stop);
      i = stop;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? text.length : end + 2;
      wipe(i, stop);
      i = stop;
    } else if (c === '"' || c === "'") {
      let k = i + 1;
      while (k < text.length && text[k] !== c && text[k] !== "\n") k += text[k] === "\\" ? 2 : 1;
      wipe(i + 1, k);
      i = k + 1;
      prev = c;
    } else if (c === "`") {
      i = template(i + 1);
      prev = "`";
    } else if (c === "/" && regexAt(prev, word)) {
      let k = i + 1;
      let cls = false;
      while (k < text.length && text[k] !== "\n" && (cls || text[k] !== "/")) {
        if (text[k] === "\\") k++;
        else if (text[k] === "[") cls = true;
        else if (text[k] === "]") cls = false;
        k++;
      }
      wipe(i + 1, k);
      i = k + 1;
      prev = "/";
    } else if (c === "}" && braces.length && braces[braces.length - 1] === 0) {
      braces.pop();
      i = template(i + 1);
      prev = "`";
    } else {
      if (c === "{" && braces.length) braces[braces.length - 1]++;
      if (c === "}" && braces.length) braces[braces.length - 1]--;
      if (/\w/.test(c)) word = /\w/.test(prev) ? word + c : c;
      if (!/\s/.test(c)) prev = c;
      i++;
    }
  }
  return out.join("");
}

/** The index just past the bracket that closes the one at `open` (same kind), or -1. */
function close(text: string, open: number): number {
  const o = text[open];
  const c = o === "(" ? ")" : "}";
  let depth = 0;
  for (let k = open; k < text.length; k++) {
    if (text[k] === o) depth++;
    else if (text[k] === c && --depth === 0) return k + 1;
  }
  return -1;
}

/** The body `{` after a parameter list that ends at `after`: directly, or after a return type. */
function bodyAfter(text: string, after: number): number {
  const rest = /^\s*(\{|:)/.exec(text.slice(after, after + 400));
  if (!rest) return -1;
  if (rest[1] === "{") return after + rest[0].length - 1;
  // A return type: the body is the first `{` that ends its line, with no `;` or `=` before it.
  const m = /^[^;=]*?\{[ \t]*\n/.exec(text.slice(after, after + 400));
  return m ? after + m[0].lastIndexOf("{") : -1;
}

export type Long = { file: string; name: string; line: number; lines: number };

/** Every function of `source` (TypeScript) and its length in lines. */
export function functions(file: string, source: string): Long[] {
  const text = blank(source);
  const lineOf = (at: number) => text.slice(0, at).split("\n").length;
  const found = new Map<number, Long>();
  const add = (name: string, head: number, body: number) => {
    const end = close(text, body);
    if (end < 0 || found.has(body)) return;
    const line = lineOf(head);
    found.set(body, { file, name, line, lines: lineOf(end) - line + 1 });
  };
  const heads = [
    /\bfunction\b\s*\*?\s*([\w$]*)\s*(?:<[^(]*?>)?\s*(\()/g,
    /^[ \t]*(?:(?:export|public|private|protected|static|async|override|get|set)\s+)*\*?\s*(#?[\w$]+)\s*(?:<[^(\n]*>)?\s*(\()/gm,
  ];
  for (const re of heads) {
    for (const m of text.matchAll(re)) {
      if (KEYWORDS.has(m[1]) && m[1] !== "function") continue;
      const open = m.index! + m[0].length - 1;
      const after = close(text, open);
      if (after < 0) continue;
      const body = bodyAfter(text, after);
      if (body >= 0) add(m[1] || "<anonymous>", m.index!, body);
    }
  }
  for (const m of text.matchAll(/=>\s*\{/g)) {
    const start = text.lastIndexOf("\n", m.index!) + 1;
    const head = /(?:([\w$]+)\s*[:=]\s*)?[^\n]*$/.exec(text.slice(start, m.index!));
    add(head?.[1] ?? "<arrow>", start, m.index! + m[0].length - 1);
  }
  return [...found.values()];
}

/** Every product .ts file under `dir` (no tests, no vendored or built output). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory && !e.name.startsWith(".") && e.name !== "dist") out.push(...sources(p));
    else if (e.isFile && e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) out.push(p);
  }
  return out.sort();
}

if (import.meta.main) {
  const args = [...Deno.args];
  const at = args.indexOf("--max");
  const max = at >= 0 ? Number(args.splice(at, 2)[1]) : 80;
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const dirs = args.length ? args : [
    "cli",
    "packaging",
    "bench",
    ...[...Deno.readDirSync(`${root}/src`)].map((e) => `src/${e.name}`),
  ]
    .sort();
  const long: Long[] = [];
  console.log("folder\tfiles\tlines");
  for (const dir of dirs) {
    const files = sources(`${root}/${dir}`);
    let lines = 0;
    for (const f of files) {
      const text = Deno.readTextFileSync(f);
      lines += text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      long.push(...functions(f.slice(root.length + 1), text).filter((l) => l.lines > max));
    }
    console.log(`${dir}\t${files.length}\t${lines}`);
  }
  console.log(`\nfunctions over ${max} lines: ${long.length}`);
  for (const l of long.sort((a, b) => b.lines - a.lines)) {
    console.log(`${l.lines}\t${l.file}:${l.line}\t${l.name}`);
  }
}
