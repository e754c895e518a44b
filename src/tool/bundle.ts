/** Makes the single-file tsh bundle that runs inside sandboxes (`deno bundle`, offline, once per process). */
import { CtxError } from "../abi/errno.ts";

const repo = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
let pending: Promise<string> | undefined;

/** Path of the bundle: `dist/tsh/tsh.js` in the checkout. */
export const BUNDLE = `${repo}/dist/tsh/tsh.js`;

/**
 * Bundles cli/tsh.ts (with its npm dependencies inlined) into {@link BUNDLE}, once per process,
 * through a temp file and a rename so concurrent builders never expose a partial file.
 */
export function tshBundle(options: { deno?: string } = {}): Promise<string> {
  pending ??= (async () => {
    await Deno.mkdir(`${repo}/dist/tsh`, { recursive: true, mode: 0o755 });
    const tmp = `${BUNDLE}.tmp-${Deno.pid}`;
    const out = await new Deno.Command(options.deno ?? Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "-o", tmp, `${repo}/cli/tsh.ts`],
      cwd: repo,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new CtxError("EIO", `deno bundle failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    await Deno.chmod(tmp, 0o644);
    await Deno.rename(tmp, BUNDLE);
    return BUNDLE;
  })();
  return pending;
}
