/** The bash tool takes its command on stdin (never on a command line) and runs it as `bash -c` would. */
import { assertEquals } from "../assert.ts";
import { runTsh } from "../../src/tool/mod.ts";
import { cleanup, toolTree } from "../fixture/mod.ts";

Deno.test("bash in the sandbox: quotes, backslashes and newlines survive; stdin is empty; exit status is the command's", async () => {
  const f = await toolTree();
  try {
    const o = { root: f.root, agent: "coder", uid: 0, workspace: f.ws };
    const command = `printf '%s|' "a  b" 'c\\d' "$0"; echo
cat; echo "stdin done"
  echo "\${CTX_BASH_COMMAND-unset}"; exit 7
`;
    const r = await runTsh(["bash", command], o);
    assertEquals([r.status, r.exitCode, r.content], [
      "error",
      7,
      "a  b|c\\d|/bin/bash|\nstdin done\nunset\n",
    ]);
    // An empty command is bash -c "": nothing, exit 0.
    const e = await runTsh(["bash", ""], o);
    assertEquals([e.status, e.exitCode, e.content], ["ok", 0, ""]);
    // A NUL byte cannot reach bash (it could not on a command line either).
    const z = await runTsh(["bash", "echo a\0b"], o);
    assertEquals([z.status, z.errno], ["error", "EINVAL"]);
  } finally {
    await cleanup(f);
  }
});
