/** `ctx model new|list`: make a provider's model object (root, in the storage tree) and list the models with their driver, URL, limit and whether a key is stored. */
import { MODEL_CONTROLS } from "../abi/controls.ts";
import { CtxError, toCtxError } from "../abi/errno.ts";
import { checkName, tempName } from "../abi/names.ts";
import { quote } from "../abi/text.ts";
import { secretPath } from "../model/secret.ts";
import { WIRE_URLS } from "../abi/providers.ts";
import { syncDir } from "../store/atomic.ts";
import { loadModel } from "../store/agent.ts";
import { hostBaseURL } from "../store/providers.ts";
import { makeDir, modelEntry, writeAll } from "../store/tree.ts";

/** Inputs of `ctx model new`. */
export interface ModelNewArgs {
  /** The tree ctx found (a mount, or a storage generation itself). */
  root: string;
  ref: string;
  driver: string;
  baseUrl?: string;
  id?: string;
  limit?: string;
  fallback?: string[];
  /** Where keys live (to say whether one is stored). */
  secrets: string;
  /** The command as typed, for the "needs root" message. */
  argv: readonly string[];
}

/** Shell-quotes `w` when it needs it. */
function shq(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`;
}

/**
 * The directory the daemon serving `root` reads its definitions from: the generation its
 * `status` names, or `root` itself when that is a storage generation (CTX_ROOT=<storage>/current).
 */
export function backingOf(root: string): string {
  let status: { storage?: unknown; generation?: unknown } | undefined;
  try {
    status = JSON.parse(Deno.readTextFileSync(`${root}/status`));
  } catch { /* not a mount: no status file */ }
  if (typeof status?.storage === "string" && status.generation !== undefined) {
    return `${Deno.realPathSync(status.storage)}/generations/${status.generation}`;
  }
  try {
    Deno.statSync(`${root}/bin/cortexfs.bootstrap.json`);
    return root;
  } catch {
    throw new CtxError("ENOENT", "neither a mount (no status) nor a storage tree", { path: root });
  }
}

/** `stored`, `none`, or `unknown` (the store cannot be looked at by this user). */
export function keyState(secrets: string, provider: string, slot = "default"): string {
  try {
    Deno.lstatSync(secretPath(provider, slot, secrets));
    return "stored";
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "none" : "unknown";
  }
}

/** The controls of a new model, each validated and in its canonical form. */
function controlsOf(a: ModelNewArgs, provider: string): Record<string, string> {
  const raw: Record<string, string> = {
    driver: `agent=${a.driver}\ndefault=${a.driver}\n`,
    cap: "chat\nstream\ntool_call_syntax\n",
    fallback: (a.fallback ?? []).map((f) => `${f}\n`).join(""),
    session: "none\n",
    effort: "auto\n",
  };
  if (a.id !== undefined) raw.id = `${a.id}\n`;
  if (a.baseUrl !== undefined) raw.default = `base_url=${a.baseUrl}\n`;
  if (a.limit !== undefined) raw.limit = `${a.limit}\n`;
  const out: Record<string, string> = {};
  for (const [name, text] of Object.entries(raw)) {
    const spec = MODEL_CONTROLS[name];
    try {
      out[name] = spec.format(spec.parse(text));
    } catch (e) {
      const err = toCtxError(e);
      throw new CtxError(err.errno, `--${name === "default" ? "base-url" : name}: ${err.message}`);
    }
  }
  if (a.driver === "openai-chat" && a.baseUrl === undefined && !hostBaseURL(provider)) {
    throw new CtxError(
      "EINVAL",
      `openai-chat needs --base-url (no /etc/cortexfs/providers.d/${provider}.json names one)`,
    );
  }
  return out;
}

/**
 * Makes `model/<provider>/<model>` in the tree the daemon serves: every control validated first,
 * the `.d/` directory built under a temporary name and renamed into place, the entry file last
 * (atomically, 0555), so a crash leaves no model half made. Root only: the model tree is root's.
 */
export function modelNew(a: ModelNewArgs): string[] {
  checkName(a.ref, { kind: "model" });
  const [provider, model, extra] = a.ref.split("/");
  if (model === undefined || extra !== undefined) {
    throw new CtxError("EINVAL", `${quote(a.ref)} is not <provider>/<model>`);
  }
  if (!(a.driver in WIRE_URLS)) {
    throw new CtxError(
      "EINVAL",
      `--driver ${quote(a.driver)} is not one of ${Object.keys(WIRE_URLS).join(", ")}`,
    );
  }
  const files = controlsOf(a, provider);
  if (Deno.uid() !== 0) {
    throw new CtxError(
      "EACCES",
      `making a model needs root (model/ is root's): run \`sudo ${a.argv.map(shq).join(" ")}\``,
    );
  }
  const dir = backingOf(a.root);
  for (const f of a.fallback ?? []) {
    if (f === a.ref) throw new CtxError("EINVAL", `--fallback ${quote(f)} is the model itself`);
    loadModel(dir, f); // ENOENT names a fallback that does not exist
  }
  const base = `${dir}/model/${provider}`;
  // An alias (`model/main`, a symlink to a model) is no provider directory: never made or
  // followed here (makeDir's chmod would reach the alias's target).
  try {
    const st = Deno.lstatSync(base);
    if (!st.isDirectory) {
      throw new CtxError("EINVAL", `model/${provider} is not a provider directory (an alias?)`);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  for (const p of [`${base}/${model}`, `${base}/${model}.d`]) {
    try {
      Deno.lstatSync(p);
      throw new CtxError(
        "EEXIST",
        `model ${a.ref} exists: change it with \`ctx set model/${a.ref}.d/<control> VALUE\``,
        { path: `model/${a.ref}` },
      );
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  makeDir(base);
  const staged = `${base}/${tempName(`${model}.d`)}`;
  try {
    makeDir(staged);
    writeAll(staged, files);
    Deno.renameSync(staged, `${base}/${model}.d`);
  } catch (e) {
    Deno.removeSync(staged, { recursive: true });
    throw e;
  }
  syncDir(base);
  const def = loadModel(dir, a.ref);
  const url = a.baseUrl ?? hostBaseURL(provider) ?? WIRE_URLS[a.driver];
  writeAll(base, {
    [model]: modelEntry(a.ref, {
      limit: def.limit,
      now: Math.floor(Date.now() / 1000),
      description: `${a.driver} model ${def.id} at ${url}`,
    }),
  }, { mode: 0o555 });
  const lines = [`model/${a.ref}: driver ${a.driver}, ${url}, id ${def.id}, limit ${def.limit}`];
  if (keyState(a.secrets, provider) !== "stored") {
    lines.push(`no ${provider} key stored: \`sudo ctx provider set ${provider} < keyfile\``);
  }
  return lines;
}

/** Every `<provider>/<model>` of the tree (aliases are listed with their target). */
function modelRefs(root: string): { ref: string; alias?: string }[] {
  const refs: { ref: string; alias?: string }[] = [];
  const dir = `${root}/model`;
  for (const p of [...Deno.readDirSync(dir)].sort((a, b) => a.name < b.name ? -1 : 1)) {
    if (p.name.endsWith(".d") || p.name.startsWith(".")) continue;
    if (p.isSymlink) {
      refs.push({ ref: Deno.readLinkSync(`${dir}/${p.name}`), alias: p.name });
      continue;
    }
    if (!p.isDirectory) continue;
    for (
      const m of [...Deno.readDirSync(`${dir}/${p.name}`)].sort((a, b) => a.name < b.name ? -1 : 1)
    ) {
      if (m.isFile && !m.name.startsWith(".")) refs.push({ ref: `${p.name}/${m.name}` });
    }
  }
  return refs;
}

/**
 * `ctx model list`: one line per model: name, driver, base URL, the limit a run uses, and whether
 * a key is stored for its provider (never the key). A model that cannot be loaded says why.
 */
export function modelList(root: string, secrets: string): string[] {
  const rows: string[][] = [["MODEL", "DRIVER", "BASE_URL", "LIMIT", "KEY"]];
  for (const { ref, alias } of modelRefs(root)) {
    const name = alias ? `${alias} -> ${ref}` : ref;
    try {
      const def = loadModel(root, ref);
      const driver = def.driver.default?.[0] ?? def.driver.agent?.[0] ?? "-";
      const sdk = driver in WIRE_URLS;
      const defaults = MODEL_CONTROLS.default.parse(readOr(`${def.dir}/default`)) as Record<
        string,
        string
      >;
      const url = sdk
        ? defaults.base_url ?? hostBaseURL(def.provider) ?? WIRE_URLS[driver] ?? "-"
        : "-";
      const key = sdk ? keyState(secrets, def.provider, defaults.slot) : "-";
      rows.push([name, driver, url, String(def.limit), key]);
    } catch (e) {
      rows.push([name, `(${toCtxError(e).errno})`, "-", "-", "-"]);
    }
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join("  "));
}

function readOr(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "";
    throw e;
  }
}
