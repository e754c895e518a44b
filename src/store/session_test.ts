/** Session directories: layout, index order, by-cwd keys. */
import { assertEquals } from "../../tests/assert.ts";
import { openSession } from "./session/files.ts";
import { cwdKey, listSessions, touchIndex } from "./session/index.ts";
import { sessionRef } from "./session/ref.ts";

Deno.test("cwdKey() is cwd- + 16 hex digits of FNV-1a 64", () => {
  assertEquals(cwdKey(""), "cwd-cbf29ce484222325");
  assertEquals(cwdKey("a"), "cwd-af63dc4c8601ec8c");
});

Deno.test("openSession() creates the files once; touchIndex() keeps newest first", () => {
  const root = Deno.makeTempDirSync();
  try {
    const at = (session: string) =>
      sessionRef({
        root,
        run: `${root}/run`,
        agent: "a",
        session,
        scope: "private",
        uid: 0,
        gid: 0,
      });
    assertEquals(openSession(at("one")), true);
    assertEquals(openSession(at("one")), false);
    assertEquals(
      [...Deno.readDirSync(at("one").dir)].map((e) => e.name).sort(),
      [
        "created_at",
        "events.jsonl",
        "latest.md",
        "messages.jsonl",
        "meta.json",
        "state",
        "updated_at",
      ],
    );
    openSession(at("two"));
    touchIndex(at("one"), "/w");
    touchIndex(at("two"), "/w");
    touchIndex(at("one"), "/w");
    assertEquals(listSessions(at("one").base), ["one", "two"]);
    assertEquals(Deno.readTextFileSync(`${at("one").base}/index/by-cwd/${cwdKey("/w")}`), "one\n");
    // temp sessions are never indexed
    touchIndex({ ...at("t"), scope: "temp" }, "/w");
    assertEquals(listSessions(at("one").base), ["one", "two"]);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
