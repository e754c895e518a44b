/** The messages between an instance and its host on their private socketpair (one SOCK_SEQPACKET message each, JSON, at most MAX_BROKER bytes, at most one fd). */
import { z } from "zod";
import { ERRNO } from "./errno.ts";

/** Longest message either side sends or reads (a longer one is refused, its fds closed). */
export const MAX_BROKER = 1024;

const id = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/**
 * `peer`: the fd the message carries is a connection the instance accepted on its agent's
 * socket; the host checks its peer and answers with the peer's cwd (an O_PATH fd) or a refusal.
 */
export const peerAsk = z.object({ op: z.literal("peer"), id }).strict();

const u32 = z.number().int().min(0).max(0xffffffff);
const path = z.string().min(1).max(512);

/**
 * `claim`: run src/store/session/claim.ts `claimDir` for this claim (its own words: the directory
 * below `trust` given to `uid`:`gid`). The host runs only the claims it computes for the agent's
 * identity itself (`claimsOf`); the message carries no fd.
 */
export const claimAsk = z.object({
  op: z.literal("claim"),
  id,
  trust: path,
  claim: path,
  uid: u32,
  gid: u32,
  mode: z.number().int().min(0).max(0o7777),
  legacy: z.array(path).max(8),
}).strict();

/** A request of an instance to its host. */
export const brokerAsk = z.discriminatedUnion("op", [peerAsk, claimAsk]);
/** A request of an instance to its host. */
export type BrokerAsk = z.infer<typeof brokerAsk>;

const errno = z.enum(Object.keys(ERRNO) as [keyof typeof ERRNO, ...(keyof typeof ERRNO)[]]);

/** The host's answer: `ok` (a `peer` answer carries the workspace fd), or refused with why. */
export const brokerAnswer = z.union([
  z.object({ id, ok: z.literal(true) }).strict(),
  z.object({ id, ok: z.literal(false), code: errno, message: z.string().max(800) }).strict(),
]);
/** The host's answer to one request. */
export type BrokerAnswer = z.infer<typeof brokerAnswer>;
/** A `claim` request. */
export type ClaimAsk = z.infer<typeof claimAsk>;
