/** A control write refused through the mount: the writer sees the errno, the daemon log the rule. */
import { assert, assertEquals, assertMatch } from "../assert.ts";
import { refusals, REFUSALS_PER_WINDOW } from "../../src/fuse/serve.ts";
import { cleanup, type Daemon, makeTree, sh, startDaemon, until } from "../fixture/mod.ts";

Deno.test("a bad control write through the mount is EINVAL to the writer and logs the broken rule", async () => {
  const tree = await makeTree();
  let d: Daemon | null = null;
  try {
    d = await startDaemon(tree);
    const daemon = d;
    const perm = `${tree.mount}/agent/coder.d/perm`;
    const before = Deno.readTextFileSync(perm);
    const r = await sh(`printf 'rwz\\n' > ${perm}`);
    assertEquals(r.code, 1);
    assertMatch(r.stderr, /Invalid argument/);
    await until(
      () => daemon.log().includes("refused uid 0 write of /ctx/agent/coder.d/perm"),
      "the log line",
    );
    const line = daemon.log().split("\n").find((l) => l.includes("refused uid 0 write"))!;
    assertMatch(
      line,
      /^cortexfsd: refused uid 0 write of \/ctx\/agent\/coder\.d\/perm: EINVAL: .+/,
    );
    assertEquals(Deno.readTextFileSync(perm), before); // nothing of the bad write landed
    // One line per refused handle: the same write again adds exactly one more.
    await sh(`printf 'rwz\\n' > ${perm}`);
    await until(
      () => daemon.log().split("\n").filter((l) => l.includes("refused uid 0 write")).length === 2,
      "the second line",
    );
  } finally {
    await cleanup(tree, d);
  }
});

Deno.test("refusal lines are bounded per uid per window; the dropped count is told later", () => {
  const lines: string[] = [];
  let now = 1_000_000;
  const refused = refusals((l) => lines.push(l), () => now);
  const err = { errno: "EINVAL", message: "bad\nrule" };
  for (let i = 0; i < REFUSALS_PER_WINDOW + 5; i++) refused("agent/a.d/perm", 1000, err);
  refused("agent/a.d/perm", 1001, err); // another uid has its own bound
  assertEquals(lines.length, REFUSALS_PER_WINDOW + 1);
  assert(lines.every((l) => !l.slice(0, -1).includes("\n")), "one line each");
  assertEquals(
    lines[0],
    "cortexfsd: refused uid 1000 write of /ctx/agent/a.d/perm: EINVAL: bad rule",
  );
  now += 10_000;
  refused("agent/a.d/perm", 1000, err);
  assertEquals(lines.slice(-2), [
    "cortexfsd: 5 more refused writes by uid 1000 not logged",
    "cortexfsd: refused uid 1000 write of /ctx/agent/a.d/perm: EINVAL: bad rule",
  ]);
});
