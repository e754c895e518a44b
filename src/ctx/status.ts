/** `ctx status`: what the tree at CTX_ROOT is, from its `status` file and bootstrap state. */
import { CtxError, ignore, toCtxError } from "../abi/errno.ts";
import type { FoundTree } from "./root.ts";

function count(dir: string, keep: (e: Deno.DirEntry) => boolean): number {
  try {
    return [...Deno.readDirSync(dir)].filter(keep).length;
  } catch (e) {
    ignore(e, Deno.errors.NotFound, Deno.errors.NotADirectory);
    return 0;
  }
}

/**
 * The `KEY=VALUE` lines `ctx status` prints: `root=` and `root_via=` (how it was found: `--root`,
 * `CTX_ROOT`, `/ctx` or `dev`), then the tree's own status.
 */
export function status(found: FoundTree): string[] {
  const root = found.root;
  let text: string;
  try {
    text = Deno.readTextFileSync(`${root}/status`);
  } catch (e) {
    const err = toCtxError(e, `${root}/status`);
    if (err.errno === "ENOENT") {
      throw new CtxError(
        "ENOENT",
        "no CortexFS tree here (no status file); set CTX_ROOT or --root",
        {
          path: root,
        },
      );
    }
    throw err;
  }
  const out = [
    `root=${root}`,
    `root_via=${found.via}`,
    ...text.split("\n").filter((l) => l !== ""),
  ];
  try {
    const b = JSON.parse(Deno.readTextFileSync(`${root}/bin/cortexfs.bootstrap.json`));
    if (typeof b?.tree_version === "number") out.push(`tree_version=${b.tree_version}`);
  } catch { /* the mount may not project the bootstrap file */ }
  // Live instances, as the status file projects them (its agents' status/pid summaries).
  try {
    const st = JSON.parse(text);
    for (const a of Array.isArray(st?.agents) ? st.agents : []) {
      if (["start", "ready", "busy", "stopping"].includes(a?.state)) {
        out.push(`instance=${a.name} state=${a.state} pid=${a.pid ?? ""}`);
      }
    }
  } catch { /* a key=value status file (no mount): no instances */ }
  const objects = (e: Deno.DirEntry) => !e.name.endsWith(".d") && !e.name.endsWith(".sock");
  out.push(`agents=${count(`${root}/agent`, (e) => e.isFile && objects(e))}`);
  out.push(`tools=${count(`${root}/tool`, (e) => e.isFile && objects(e))}`);
  return out;
}
