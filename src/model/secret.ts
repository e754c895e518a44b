/** Provider secrets on the host: `<CORTEXFS_SECRETS>/provider/<provider>/<slot>`, 0600, never anywhere else. */
import { CtxError } from "../abi/errno.ts";
import { ensureDir, replaceFile } from "../store/atomic.ts";
import { readRegular } from "../store/regular.ts";

/** Default secret store (DESIGN.md "Where state lives"). */
export const DEFAULT_SECRETS = "/var/lib/cortexfs/secrets";
/** Largest key read or written. */
export const MAX_SECRET = 16 * 1024;

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** The secret store root: `CORTEXFS_SECRETS` of this (host) process, else the default. */
export function secretsRoot(env: { get(k: string): string | undefined } = Deno.env): string {
  return env.get("CORTEXFS_SECRETS") || DEFAULT_SECRETS;
}

/** Path of `provider`'s key in `slot` (EINVAL for names outside `[a-z0-9][a-z0-9._-]*`). */
export function secretPath(provider: string, slot: string, root = secretsRoot()): string {
  for (const [what, v] of [["provider", provider], ["slot", slot]]) {
    if (!NAME.test(v) || v === "." || v === "..") {
      throw new CtxError("EINVAL", `${what} ${JSON.stringify(v)} is not [a-z0-9][a-z0-9._-]*`);
    }
  }
  return `${root}/provider/${provider}/${slot}`;
}

/**
 * The key of `provider`/`slot`, or undefined when none is stored (a local server needs none). The
 * file must be a regular file (never followed through a symlink) that only its owner can read:
 * a key others can read is refused EACCES rather than used.
 */
export function readSecret(
  provider: string,
  slot: string,
  root = secretsRoot(),
): string | undefined {
  const path = secretPath(provider, slot, root);
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new CtxError("EACCES", `cannot read the ${provider} key`, { path });
  }
  if (!st.isFile || ((st.mode ?? 0) & 0o077) !== 0) {
    throw new CtxError(
      "EACCES",
      `the ${provider}/${slot} key is not a regular file readable only by its owner`,
      { path },
    );
  }
  const bytes = readRegular(path, { max: MAX_SECRET });
  if (!bytes) return undefined;
  const key = new TextDecoder().decode(bytes).replace(/\r?\n$/, "");
  return key === "" ? undefined : key;
}

/**
 * Stores `key` for `provider`/`slot`: directories 0711, the file 0600 root's (owner-only),
 * written by atomic replace. The key must be one line of printable characters.
 */
export function writeSecret(
  provider: string,
  slot: string,
  options: { key: string; root?: string },
): string {
  const root = options.root ?? secretsRoot();
  const path = secretPath(provider, slot, root);
  const key = options.key.replace(/\r?\n$/, "");
  if (key === "" || key.length > MAX_SECRET || !/^[\x21-\x7e]+$/.test(key)) {
    throw new CtxError("EINVAL", "the key must be one non-empty line of printable characters");
  }
  // Only the store's own levels are made 0711; a missing parent is an ordinary 0755 directory.
  // 0711: nobody else can list or read them, but anyone may stat a path they already know, so
  // `ctx model list` can say whether a provider's key is stored (never what it is).
  const parent = root.replace(/\/+[^/]*\/*$/, "");
  if (parent !== "") ensureDir(parent, 0o755);
  for (const d of [root, `${root}/provider`, `${root}/provider/${provider}`]) {
    ensureDir(d, 0o711);
    Deno.chmodSync(d, 0o711);
  }
  replaceFile(path, `${key}\n`, { mode: 0o600, uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0 });
  return path;
}

/** Shortest run of a key's characters (in any form below) that {@link redact} treats as the key. */
export const MIN_RUN = 8;

/** The base64 (and base64url) texts that stand for `key`'s bytes wherever they sit in an encoded stream. */
function base64Forms(key: string): string[] {
  const bytes = new TextEncoder().encode(key);
  const out: string[] = [];
  // An echo may encode the key after any number of other bytes: three alignments cover them all.
  // Only whole 3-byte groups of key bytes encode the same way whatever surrounds them.
  for (let k = 0; k < 3; k++) {
    const skip = (3 - k) % 3;
    const body = bytes.subarray(skip, skip + Math.floor((bytes.length - skip) / 3) * 3);
    if (body.length === 0) continue;
    const b64 = btoa(String.fromCharCode(...body));
    out.push(b64, b64.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return out;
}

/**
 * `text` with every form of `key` a provider may echo replaced by `<redacted>`: the key itself,
 * JSON-escaped, URL-encoded (either hex case), base64 and base64url of it at any
 * alignment; and within each of those forms, any run of {@link MIN_RUN} or more characters that
 * occurs in it (a partial echo such as `sk-proj-abc…`, or the key cut by the provider). A key
 * shorter than MIN_RUN is redacted only whole, in each form.
 */
export function redact(text: string, key: string | undefined): string {
  if (!key) return text;
  const url = encodeURIComponent(key);
  const forms = new Set([
    key,
    JSON.stringify(key).slice(1, -1),
    url,
    url.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
    encodeURIComponent(JSON.stringify(key).slice(1, -1)),
    ...base64Forms(key),
  ]);
  const cover = new Uint8Array(text.length);
  for (const f of forms) {
    const n = Math.min(MIN_RUN, f.length);
    if (f.length < MIN_RUN) {
      for (let i = text.indexOf(f); i >= 0; i = text.indexOf(f, i + 1)) cover.fill(1, i, i + n);
      continue;
    }
    const runs = new Set<string>();
    for (let i = 0; i + n <= f.length; i++) runs.add(f.slice(i, i + n));
    for (let i = 0; i + n <= text.length; i++) {
      if (runs.has(text.slice(i, i + n))) cover.fill(1, i, i + n);
    }
  }
  let out = "";
  for (let i = 0; i < text.length;) {
    if (!cover[i]) {
      out += text[i++];
      continue;
    }
    while (cover[i]) i++;
    out += "<redacted>";
  }
  return out;
}
