/** `bin/cortexfs.bootstrap.json`: a generation's tree_version and migration audit, written last. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { replaceFile } from "./atomic.ts";

/** The bootstrap file's path inside a generation directory. */
export const BOOTSTRAP_PATH = "bin/cortexfs.bootstrap.json";

/** The schema tag of the bootstrap file. */
export const BOOTSTRAP_SCHEMA = "cortexfs.bootstrap/v1";

/** The parsed bootstrap state. */
export interface Bootstrap {
  schema: typeof BOOTSTRAP_SCHEMA;
  /** The tree_version this generation is at. */
  tree_version: number;
  /** Every migration applied to reach it, oldest first. */
  applied_migrations: { version: number; id: string }[];
}

/** Parses and checks the bootstrap bytes (EIO: a generation's own state must never be guessed). */
export function parseBootstrap(text: string, path = BOOTSTRAP_PATH): Bootstrap {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new CtxError("EIO", "bootstrap file is not JSON", { path });
  }
  const o = v as Record<string, unknown>;
  const bad = (rule: string) => new CtxError("EIO", `bootstrap file: ${rule}`, { path });
  if (typeof o !== "object" || o === null || Array.isArray(o)) throw bad("not a JSON object");
  if (o.schema !== BOOTSTRAP_SCHEMA) {
    throw bad(`schema is ${JSON.stringify(o.schema)}, expected "${BOOTSTRAP_SCHEMA}"`);
  }
  const tv = o.tree_version;
  if (typeof tv !== "number" || !Number.isSafeInteger(tv) || tv < 1) {
    throw bad(`tree_version ${JSON.stringify(tv)} is not a positive integer`);
  }
  const am = o.applied_migrations;
  if (!Array.isArray(am)) throw bad("applied_migrations is not an array");
  const applied = am.map((m, i) => {
    const r = m as Record<string, unknown>;
    if (typeof r?.version !== "number" || typeof r?.id !== "string") {
      throw bad(`applied_migrations[${i}] is not {version, id}`);
    }
    return { version: r.version, id: r.id };
  });
  return { schema: BOOTSTRAP_SCHEMA, tree_version: tv, applied_migrations: applied };
}

/** The canonical bytes of a bootstrap state (stable key order, final newline). */
export function formatBootstrap(b: Bootstrap): string {
  return JSON.stringify(
    { schema: b.schema, tree_version: b.tree_version, applied_migrations: b.applied_migrations },
    null,
    2,
  ) + "\n";
}

/** Reads a generation's bootstrap state; a missing file is ENOENT, a malformed one EIO. */
export function readBootstrap(dir: string): Bootstrap {
  const path = `${dir}/${BOOTSTRAP_PATH}`;
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    throw toCtxError(e, path);
  }
  return parseBootstrap(text, path);
}

/** Writes the bootstrap state with the atomic replace (the last write of a generation). */
export function writeBootstrap(dir: string, b: Bootstrap): void {
  replaceFile(`${dir}/${BOOTSTRAP_PATH}`, formatBootstrap(b), { mode: 0o644 });
}
