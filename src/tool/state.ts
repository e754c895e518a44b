/** tsh load/pin state in the agent home: loaded tool metadata, LRU-evicted unless pinned. */
import { CtxError } from "../abi/errno.ts";
import { ensureDir, replaceFile } from "../store/atomic.ts";

/** One loaded tool's metadata (never an authority control: names and descriptions only). */
export interface Loaded {
  name: string;
  path: string;
  description: string;
  pinned: boolean;
  /** Monotonic use counter for LRU eviction. */
  used: number;
}

/** The whole state file. */
export interface TshState {
  version: 1;
  clock: number;
  loaded: Loaded[];
}

/** Default number of unpinned entries kept (tool/tsh.d/config `cache_capacity`). */
export const CAPACITY = 32;

/** Default hard bound on loaded entries, pinned included (`max_loaded_tools`). */
export const MAX_LOADED = 64;

/** The state file under an agent home. */
export function statePath(home: string): string {
  return `${home}/.tsh/state.json`;
}

/** Reads the state; a missing file is empty state, a corrupt one is EIO (never silently reset). */
export function readState(home: string): TshState {
  let text: string;
  try {
    text = Deno.readTextFileSync(statePath(home));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { version: 1, clock: 0, loaded: [] };
    throw e;
  }
  return parseState(text, statePath(home));
}

/** Parses a state file's text; a corrupt one is EIO naming `path`. */
export function parseState(text: string, path: string): TshState {
  try {
    const s = JSON.parse(text);
    // The agent home is the sandbox's to write, and the host's prompt reads this file: every field
    // is checked by hand (tsh's sandbox bundle carries no zod), extra keys refused.
    if (!exact(s, ["version", "clock", "loaded"]) || s.version !== 1 || !count(s.clock)) {
      throw new Error("bad shape");
    }
    if (!Array.isArray(s.loaded)) throw new Error("loaded is not a list");
    s.loaded.forEach((l: unknown, i: number) => {
      if (!isLoaded(l)) throw new Error(`loaded[${i}] is not a tool entry`);
    });
    return { version: 1, clock: s.clock as number, loaded: s.loaded };
  } catch (e) {
    throw new CtxError("EIO", `tsh state is corrupt: ${(e as Error).message}`, { path });
  }
}

function exact(v: unknown, keys: string[]): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const k = Object.keys(v);
  return k.length === keys.length && keys.every((x) => Object.hasOwn(v, x));
}

function count(v: unknown): boolean {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

function isLoaded(l: unknown): l is Loaded {
  return exact(l, ["name", "path", "description", "pinned", "used"]) &&
    typeof l.name === "string" && typeof l.path === "string" &&
    typeof l.description === "string" && typeof l.pinned === "boolean" && count(l.used);
}

/** Writes the state atomically. */
export function writeState(home: string, state: TshState): void {
  ensureDir(`${home}/.tsh`, 0o700);
  replaceFile(statePath(home), JSON.stringify(state) + "\n", { mode: 0o600 });
}

/**
 * Adds (or refreshes) a tool; `pin` protects it. Then evicts least-recently-used unpinned
 * entries while more than `capacity` (and never more than `max`) are loaded. Pinned entries are
 * never evicted: a load or pin that would need more than `max` of them is ENOSPC, state unchanged.
 * Only this metadata list changes; nothing here reads or writes an authority control.
 */
export function load(
  state: TshState,
  entry: Omit<Loaded, "used" | "pinned">,
  options: { pin?: boolean; capacity?: number; max?: number } = {},
): string[] {
  const capacity = options.capacity ?? CAPACITY;
  const max = options.max ?? MAX_LOADED;
  const old = state.loaded.find((l) => l.name === entry.name);
  const pinned = state.loaded.filter((l) => l.pinned).length;
  // A new entry, or a new pin, needs a slot that no eviction can free once pins fill `max`.
  if ((!old || (options.pin && !old.pinned)) && pinned >= max) {
    throw new CtxError(
      "ENOSPC",
      `cannot ${
        options.pin ? "pin" : "load"
      } ${entry.name}: ${pinned} pinned tools fill max_loaded_tools=${max} (unpin one)`,
    );
  }
  const at = ++state.clock;
  if (old) {
    Object.assign(old, entry, { used: at, pinned: old.pinned || (options.pin ?? false) });
  } else state.loaded.push({ ...entry, pinned: options.pin ?? false, used: at });
  const bound = Math.min(capacity, max);
  const evicted: string[] = [];
  while (state.loaded.length > bound) {
    const victims = state.loaded.filter((l) => !l.pinned && l.name !== entry.name);
    if (victims.length === 0) break;
    const v = victims.reduce((a, b) => (a.used <= b.used ? a : b));
    state.loaded = state.loaded.filter((l) => l !== v);
    evicted.push(v.name);
  }
  return evicted;
}

/** Removes a tool (pinned or not). True when it was loaded. */
export function unload(state: TshState, name: string): boolean {
  const n = state.loaded.length;
  state.loaded = state.loaded.filter((l) => l.name !== name);
  return state.loaded.length !== n;
}

/** Unpins a tool (it stays loaded). True when it was pinned. */
export function unpin(state: TshState, name: string): boolean {
  const l = state.loaded.find((x) => x.name === name);
  if (!l?.pinned) return false;
  l.pinned = false;
  return true;
}
