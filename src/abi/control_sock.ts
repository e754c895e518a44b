/** Host control socket requests (`<run>/control.sock`, spec/runtime.md "Host control socket"). */
import { z } from "zod";

// Agent and session names as the host takes them (the terminal id grammar's characters).
const name = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}$/, {
  message: "must be a name ([a-zA-Z0-9][a-zA-Z0-9._+-]{0,63})",
});

/** One request line, strict: an unknown op or key, or a value of the wrong type, is EINVAL. */
export const controlRequest = z.discriminatedUnion("op", [
  z.strictObject({ op: z.literal("ps") }),
  z.strictObject({ op: z.literal("status"), agent: name }),
  z.strictObject({
    op: z.literal("start"),
    agent: name,
    session: name.optional(),
    /** false: start the instance only, no session terminal. */
    terminal: z.boolean().optional(),
  }),
  z.strictObject({ op: z.literal("stop"), agent: name }),
]);
/** A host control request. */
export type ControlRequest = z.infer<typeof controlRequest>;
