/** The run index: request id -> run, run -> status, in node:sqlite; a view rebuilt from events.jsonl alone. */
import { DatabaseSync } from "node:sqlite";
import { toCtxError } from "../abi/errno.ts";
import { checkRegular } from "./regular.ts";

/** One run as the index knows it. */
export interface RunRow {
  run: string;
  dir: string;
  client_id: string;
  digest: string;
  status: string;
  started: number;
  ended: number | null;
  calls: number;
}

// node:sqlite rows have a null prototype; callers compare and spread plain objects.
function plain(row: unknown): RunRow | undefined {
  return row ? { ...(row as RunRow) } : undefined;
}

/**
 * Makes the index file (and any -wal/-shm) 0600 before SQLite opens it: SQLite gives its WAL and
 * shared-memory files the database file's mode, and the index names every session directory.
 */
function private0600(path: string): void {
  checkRegular(path, { create: 0o600 }); // never a FIFO's wait, nor a symlink's target
  for (const p of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      Deno.chmodSync(p, 0o600);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw toCtxError(e, p);
    }
  }
}

/** The SQLite index of runs and client request ids. Deleting its file loses nothing. */
export class RunIndex {
  #db: DatabaseSync;

  /** Opens (or creates) the index at `path` (":memory:" for none). */
  constructor(path: string) {
    if (path !== ":memory:") private0600(path);
    this.#db = new DatabaseSync(path);
    this.#db.exec(`
      PRAGMA journal_mode=WAL;
      PRAGMA synchronous=NORMAL;
      CREATE TABLE IF NOT EXISTS runs(
        run TEXT PRIMARY KEY, dir TEXT NOT NULL, client_id TEXT NOT NULL, digest TEXT NOT NULL,
        status TEXT NOT NULL, started REAL NOT NULL, ended REAL, calls INTEGER NOT NULL DEFAULT 0,
        UNIQUE(dir, client_id));
    `);
  }

  /** The run a client id already names in a session dir, if any. */
  lookup(dir: string, clientId: string): RunRow | undefined {
    return plain(
      this.#db.prepare("SELECT * FROM runs WHERE dir = ? AND client_id = ?").get(dir, clientId),
    );
  }

  /** A run by id. */
  get(run: string): RunRow | undefined {
    return plain(this.#db.prepare("SELECT * FROM runs WHERE run = ?").get(run));
  }

  /** Records a started run (status `active`). */
  begin(row: { run: string; dir: string; client_id: string; digest: string; started: number }) {
    this.#db.prepare(
      "INSERT OR REPLACE INTO runs(run, dir, client_id, digest, status, started) VALUES (?,?,?,?,?,?)",
    ).run(row.run, row.dir, row.client_id, row.digest, "active", row.started);
  }

  /** Counts one tool call of a run. */
  call(run: string): void {
    this.#db.prepare("UPDATE runs SET calls = calls + 1 WHERE run = ?").run(run);
  }

  /** Records a run's final status. */
  finish(run: string, status: string, ended: number): void {
    this.#db.prepare("UPDATE runs SET status = ?, ended = ? WHERE run = ?").run(status, ended, run);
  }

  /** Runs of one session dir, oldest first. */
  list(dir: string): RunRow[] {
    return this.#db.prepare("SELECT * FROM runs WHERE dir = ? ORDER BY started").all(dir)
      .map((r) => plain(r) as RunRow);
  }

  /**
   * Drops everything and re-reads the given sessions' events (the caller reads each
   * `events.jsonl`, as the session's owner, and skips the ones that do not parse). Returns the
   * runs that started but never reached `done` (interrupted by a crash), with their session dirs.
   */
  rebuild(sessions: Iterable<{ dir: string; events: unknown[] }>): RunRow[] {
    this.#db.exec("BEGIN");
    const open: RunRow[] = [];
    try {
      this.#db.exec("DELETE FROM runs");
      for (const { dir, events } of sessions) {
        const active = new Map<string, RunRow>();
        for (const f of events) {
          const e = f as Record<string, unknown>;
          const run = String(e.run ?? "");
          if (e.type === "start") {
            const row: RunRow = {
              run,
              dir,
              client_id: String(e.client_id),
              digest: String(e.digest ?? ""),
              status: "active",
              started: Number(e.ts ?? 0),
              ended: null,
              calls: 0,
            };
            this.begin(row);
            active.set(run, row);
          } else if (e.type === "tool_call") {
            this.call(run);
          } else if (e.type === "done") {
            this.finish(run, String(e.status), Number(e.ts ?? 0));
            active.delete(run);
          }
        }
        open.push(...active.values());
      }
      this.#db.exec("COMMIT");
    } catch (e) {
      this.#db.exec("ROLLBACK");
      throw e;
    }
    return open;
  }

  /** Closes the database. */
  close(): void {
    this.#db.close();
  }
}
