/** The authority controls of one agent, re-read from its control directory on every call. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { parseGid, parseGroups, parseLabel, parseUid } from "../abi/identity.ts";
import { parsePerm, type Perm } from "../abi/choice.ts";
import { parsePolicy, type PolicyRule } from "../abi/policy.ts";
import { parseToolPath } from "../abi/view.ts";
import { nameFault } from "../abi/names.ts";

/** The authority-bearing part of an agent view. */
export interface AgentControls {
  name: string;
  /** Host path of `agent/<name>.d`. */
  dir: string;
  /** The label's type: the policy subject. */
  subject: string;
  perm: Perm;
  policy: PolicyRule[];
  /** `path`: tool directories (view paths) building CTX_PATH; null when the control is absent. */
  path: string[] | null;
  uid: number;
  gid: number;
  groups: number[];
}

function read(dir: string, control: string): string | null {
  try {
    return Deno.readTextFileSync(`${dir}/${control}`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw toCtxError(e, `${dir}/${control}`);
  }
}

function need(dir: string, control: string): string {
  const t = read(dir, control);
  if (t === null) {
    throw new CtxError("EACCES", `agent control "${control}" is missing (authority fails closed)`, {
      path: `${dir}/${control}`,
    });
  }
  return t;
}

/**
 * Reads `agent/<name>.d/{label,perm,policy,path,uid,gid,groups}` under `root` now. A missing
 * authority control denies (EACCES); a malformed one is EINVAL. `uid` falls back to `owner`,
 * `gid` to the uid.
 */
export function readControls(root: string, name: string): AgentControls {
  const fault = nameFault(name, "agent");
  if (fault) throw new CtxError("EINVAL", `agent name "${name}" ${fault}`);
  const dir = `${root}/agent/${name}.d`;
  try {
    if (!Deno.statSync(dir).isDirectory) throw new Error("not a directory");
  } catch {
    throw new CtxError("ENOENT", `agent "${name}" does not exist`, { path: dir });
  }
  const uidText = read(dir, "uid") ?? need(dir, "owner");
  const uid = parseUid(uidText);
  const gidText = read(dir, "gid");
  const pathText = read(dir, "path");
  return {
    name,
    dir,
    subject: parseLabel(need(dir, "label")).type,
    perm: parsePerm(need(dir, "perm")),
    policy: parsePolicy(need(dir, "policy")),
    path: pathText === null ? null : parseToolPath(pathText),
    uid,
    gid: gidText === null ? uid : parseGid(gidText),
    groups: parseGroups(read(dir, "groups") ?? ""),
  };
}
