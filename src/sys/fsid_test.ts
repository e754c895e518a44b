/** asUser(): path checks as another uid/gid/groups on this thread, root restored afterwards. */
import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { CtxError, ignore } from "../abi/errno.ts";
import { asSender, asUser, currentFsId } from "./fsid.ts";

const root = Deno.uid() === 0;
const U = { uid: 1000, gid: 1000 };

function fixture(): string {
  const dir = Deno.makeTempDirSync({ prefix: "fsid-" });
  Deno.chmodSync(dir, 0o1777);
  Deno.writeTextFileSync(`${dir}/secret`, "root only\n", { mode: 0o600 });
  Deno.writeTextFileSync(`${dir}/group`, "group 4242\n", { mode: 0o640 });
  Deno.chownSync(`${dir}/group`, 0, 4242);
  return dir;
}

function errnoOf(fn: () => unknown): string {
  try {
    fn();
    return "ok";
  } catch (e) {
    return e instanceof CtxError ? e.errno : (e as { code?: string }).code ?? String(e);
  }
}

Deno.test({
  name: "asUser() checks paths as the user: a root 0600 file is EACCES, new files are the user's",
  ignore: !root,
  fn() {
    const dir = fixture();
    try {
      const seen = asUser(U, () => {
        Deno.writeTextFileSync(`${dir}/mine`, "x");
        Deno.symlinkSync(`${dir}/secret`, `${dir}/link`);
        return {
          id: currentFsId(),
          secret: errnoOf(() => Deno.readTextFileSync(`${dir}/secret`)),
          link: errnoOf(() => Deno.readTextFileSync(`${dir}/link`)),
        };
      });
      const st = Deno.lstatSync(`${dir}/mine`);
      assertEquals(
        { ...seen, owner: [st.uid, st.gid], after: currentFsId() },
        {
          id: { uid: 1000, gid: 1000 },
          secret: "EACCES",
          link: "EACCES",
          owner: [1000, 1000],
          after: { uid: 0, gid: 0 },
        },
      );
      assertEquals(Deno.readTextFileSync(`${dir}/secret`), "root only\n"); // root again
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "asUser() restores root when fn throws, and refuses an fn that returns a Promise",
  ignore: !root,
  fn() {
    assertThrows(() => asUser(U, () => Deno.readTextFileSync("/nonexistent/x")), Error);
    assertEquals(currentFsId(), { uid: 0, gid: 0 });
    const e = assertThrows(() => asUser(U, async () => {}), CtxError);
    assertEquals([e.errno, currentFsId()], ["EINVAL", { uid: 0, gid: 0 }]);
  },
});

Deno.test({
  name: "asUser() uses exactly the given supplementary groups (none of the daemon's)",
  ignore: !root,
  fn() {
    const dir = fixture();
    try {
      const read = (groups: number[]) =>
        asUser({ ...U, groups }, () => errnoOf(() => Deno.readTextFileSync(`${dir}/group`)));
      assertEquals([read([]), read([4242]), read([7, 4242])], ["EACCES", "ok", "ok"]);
      // A gid 0 identity with no groups still cannot read root's private file as uid 1000.
      const zero = asUser(
        { uid: 1000, gid: 0 },
        () => errnoOf(() => Deno.readTextFileSync(`${dir}/secret`)),
      );
      assertEquals(zero, "EACCES");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "asSender() sends as the uid on this thread only: euid the uid while it runs (real and saved 0), then root again with every effective capability and the fsuid in force before",
  ignore: !root,
  fn() {
    const line = (f: string) => {
      const m = Deno.readTextFileSync("/proc/thread-self/status").match(
        new RegExp(`^${f}:\\s+(.*)$`, "m"),
      );
      return m?.[1].split(/\s+/).join(" ");
    };
    const before = { uid: line("Uid"), eff: line("CapEff") };
    const during = asUser(U, () =>
      asSender(54321, () => ({
        uid: line("Uid"),
        eff: line("CapEff"),
        // Every thread of the process whose euid is the uid: this one alone.
        others: [...Deno.readDirSync("/proc/self/task")].filter((t) => {
          try {
            return /^Uid:\s+\d+\s+54321\s/m.test(
              Deno.readTextFileSync(`/proc/self/task/${t.name}/status`),
            );
          } catch (e) {
            ignore(e, Deno.errors.NotFound);
            return false; // a thread of another test module that ended meanwhile
          }
        }).length,
      })));
    assertEquals(during, {
      uid: "0 54321 0 54321", // real, effective, saved, fs: the fsuid follows the euid
      eff: "0000000000000000",
      others: 1,
    });
    // The fsuid asUser set is back inside asUser, and all of root afterwards.
    assertEquals(asUser(U, () => asSender(54321, () => 0) + currentFsId().uid), 1000);
    assertEquals({ uid: line("Uid"), eff: line("CapEff") }, before);
    assertEquals(asSender(0, () => line("Uid")), "0 0 0 0");
  },
});
