/** Migration 4 `secret-control-modes`: every secret control (an agent's `env`) becomes 0600, readable only by root and, through the mount, the agent's owner. */
import { closeSync, constants, fchmodSync, fstatSync, openSync } from "node:fs";
import { type ControlKind, SECRET_CONTROLS, SECRET_MODE } from "../abi/controls.ts";
import { CtxError, toCtxError } from "../abi/errno.ts";
import type { TreeContext } from "./tree.ts";

/** Never through a symlink, never blocking on a FIFO swapped in: only the regular file itself. */
const FILE_OPEN = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** The system-tier class directories whose objects can have secret controls, and their depth. */
const CLASSES: readonly { kind: ControlKind; depth: number }[] = [
  { kind: "agent", depth: 1 }, // agent/<n>.d
  { kind: "tool", depth: 1 }, // tool/<n>.d
  { kind: "model", depth: 2 }, // model/<p>/<m>.d
];

/** The control directories of a class (`<dir>/<kind>/**.d` at its depth); symlinks not followed. */
function controlDirs(top: string, depth: number): string[] {
  let names: Deno.DirEntry[];
  try {
    names = [...Deno.readDirSync(top)];
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw toCtxError(e, top);
  }
  const out: string[] = [];
  for (const e of names) {
    if (!e.isDirectory) continue; // readDir reports a symlink as a symlink, never followed
    const p = `${top}/${e.name}`;
    if (depth === 1) {
      if (e.name.endsWith(".d") && e.name.length > 2) out.push(p);
    } else out.push(...controlDirs(p, depth - 1));
  }
  return out;
}

/**
 * Sets the mode of the regular file `path` to {@link SECRET_MODE} through its descriptor. Migration
 * 3 ran first, so the file is root's with one link in a root-only directory: a chmod in place
 * reaches no other name and nobody can swap it meanwhile. An absent control is fine (env is optional).
 */
function privatize(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, FILE_OPEN);
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return;
    throw toCtxError(e, path);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new CtxError("EINVAL", "a control must be a regular file", { path });
    if ((st.mode & 0o7777) !== SECRET_MODE) fchmodSync(fd, SECRET_MODE);
  } finally {
    closeSync(fd);
  }
}

/**
 * Gives every secret control ({@link SECRET_CONTROLS}) under `agent/`, `tool/` and `model/` of the
 * generation `dir` mode 0600. Older trees made `env` 0644 like every control, so any local user
 * could read an executable agent's key; the owner keeps reading it through the mount.
 */
export function privateSecretControls(dir: string, _ctx: TreeContext): void {
  for (const { kind, depth } of CLASSES) {
    const names = SECRET_CONTROLS[kind];
    if (names.size === 0) continue;
    for (const d of controlDirs(`${dir}/${kind}`, depth)) {
      for (const n of names) privatize(`${d}/${n}`);
    }
  }
}
