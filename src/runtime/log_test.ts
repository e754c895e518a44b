/** Rotated host logs (log.ts) and the agent log summary (presence.ts) on real files, written past their limits. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { appendRotated, previousOf, rotate } from "./log.ts";
import { LOG_BYTES, Presence } from "./presence.ts";
import { ignore } from "../abi/errno.ts";

const read = (p: string) => Deno.readTextFileSync(p);
const exists = (p: string) => {
  try {
    Deno.lstatSync(p);
    return true;
  } catch (e) {
    ignore(e, Deno.errors.NotFound);
    return false;
  }
};
const line = (i: number) => `line ${String(i).padStart(4, "0")} ${"x".repeat(40)}\n`;

Deno.test("appendRotated() moves the log to .1 when an append would pass the limit; whole lines, the previous .1 replaced", () => {
  const dir = Deno.makeTempDirSync({ prefix: "cortexfs-log-" });
  try {
    const path = `${dir}/a.log`;
    const limit = 1000;
    const all: string[] = [];
    for (let i = 0; i < 60; i++) {
      all.push(line(i));
      appendRotated(path, line(i), { limit });
      assert(Deno.statSync(path).size <= limit, `${path} past the limit after line ${i}`);
    }
    // 60 lines of 51 bytes: 19 fit in 1000 bytes, so it rotated three times (after 19, 38, 57).
    const cur = read(path), prev = read(previousOf(path));
    assertEquals([cur, prev], [all.slice(57).join(""), all.slice(38, 57).join("")]);
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o600);
    // One append longer than the limit: kept whole in a fresh file.
    const big = "y".repeat(1500) + "\n";
    appendRotated(path, big, { limit });
    assertEquals([read(path), read(previousOf(path))], [big, all.slice(57).join("")]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("rotate() at a writer's start: a file at or past the limit becomes .1, a smaller or missing one stays", () => {
  const dir = Deno.makeTempDirSync({ prefix: "cortexfs-log-" });
  try {
    const path = `${dir}/t.log`;
    assertEquals(rotate(path, { limit: 10 }), false); // none
    Deno.writeTextFileSync(path, "short\n");
    assertEquals(rotate(path, { limit: 10 }), false);
    Deno.writeTextFileSync(path, "0123456789\n");
    assertEquals(rotate(path, { limit: 10 }), true);
    assertEquals([exists(path), read(previousOf(path))], [false, "0123456789\n"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("Presence.log() past both limits: agent/<n>.d/log keeps its newest whole lines within LOG_BYTES, the run dir's log rotates", () => {
  const dir = Deno.makeTempDirSync({ prefix: "cortexfs-log-" });
  try {
    Deno.mkdirSync(`${dir}/root/agent/a.d`, { recursive: true });
    Deno.mkdirSync(`${dir}/log`);
    const limit = 64 * 1024;
    const p = new Presence(`${dir}/root`, { logDir: `${dir}/log`, logBytes: limit });
    const all: string[] = [];
    // Past 2 x 64 KiB in the run dir (so .1 was replaced once) and far past the 48 KiB summary.
    for (let i = 0; all.length * 51 < 3 * limit; i++) {
      all.push(line(i % 10000));
      p.log("a", line(i % 10000));
    }
    const summary = read(`${dir}/root/agent/a.d/log`);
    assert(new TextEncoder().encode(summary).length <= LOG_BYTES);
    assert(all.join("").endsWith(summary) && summary.startsWith("line "), "newest whole lines");
    const cur = read(`${dir}/log/a.log`), prev = read(`${dir}/log/a.log.1`);
    assert(cur.length <= limit && prev.length <= limit && prev.length > limit - 51);
    assert(all.join("").endsWith(prev + cur), "the previous file, then the current one");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
