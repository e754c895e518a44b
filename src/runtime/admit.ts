/** The owner rule: which peer uids may talk to an agent (its owner and root), asked by the instance of each connection and by its host before it starts one. */
import { CtxError } from "../abi/errno.ts";
import { AGENT_CONTROLS } from "../abi/controls.ts";
import { readControl, resolveAgent } from "../store/agent.ts";

/** EACCES unless `uid` is 0 or `owner`. */
export function checkOwner(uid: number, name: string, owner: number): void {
  if (uid !== 0 && uid !== owner) {
    throw new CtxError(
      "EACCES",
      `peer uid ${uid} is neither the owner (${owner}) of agent ${name} nor 0`,
    );
  }
}

/**
 * The owner rule at accept, by uid alone (EACCES when `uid` may not talk to agent `name` of tree
 * `root`): the instance applies it to each connection it accepts (src/runtime/ops.ts
 * `admitPeer`), and its host to a connection to an idle agent before it starts the instance
 * (src/host/supervisor.ts).
 */
export function admitUid(root: string, name: string, uid: number): void {
  const owner = ownerOf(root, name);
  if (owner === undefined) {
    throw new CtxError("EACCES", `agent ${name} has no owner control: authority fails closed`);
  }
  checkOwner(uid, name, owner);
}

/** Agent `name`'s `owner` control, or undefined when it has none. */
export function ownerOf(root: string, name: string): number | undefined {
  const dir = `${root}/agent/${resolveAgent(root, name)}.d`;
  return readControl<number>(dir, "owner", AGENT_CONTROLS.owner);
}
