/** A tree, a daemon and a workspace for model-backed runs against the local OpenAI-wire server. */
import { createAgent } from "../../src/store/agent_new.ts";
import { replaceFile } from "../../src/store/atomic.ts";
import { modelEntry } from "../../src/store/tree.ts";
import { writeSecret } from "../../src/model/secret.ts";
import {
  cleanup,
  ctx,
  makeTree,
  type Ran,
  type RuntimeDaemon,
  startRuntimeDaemon,
  type Tree,
  workspace,
} from "../fixture/mod.ts";

/** One test's world. */
export interface World {
  f: Tree;
  d: RuntimeDaemon;
  ws: string;
}

/** Writes `model/<ref>` (+ `.d/`) on `driver` against `baseURL`, with `limit` (absent: none written). */
export function addModel(
  f: Tree,
  ref: string,
  o: { baseURL: string; id?: string; limit?: number; fallback?: string[]; driver?: string },
): void {
  const [p] = ref.split("/");
  const d = `${f.root}/model/${ref}.d`;
  Deno.mkdirSync(`${f.root}/model/${p}`, { recursive: true });
  Deno.mkdirSync(d);
  const driver = o.driver ?? "openai-chat";
  replaceFile(`${d}/driver`, `agent=${driver}\ndefault=${driver}\n`);
  replaceFile(`${d}/id`, `${o.id ?? ref.split("/")[1]}\n`);
  replaceFile(`${d}/default`, `base_url=${o.baseURL}\n`);
  if (o.limit !== undefined) replaceFile(`${d}/limit`, `${o.limit}\n`);
  if (o.fallback) replaceFile(`${d}/fallback`, o.fallback.map((r) => `${r}\n`).join(""));
  replaceFile(
    `${f.root}/model/${ref}`,
    modelEntry(ref, { limit: o.limit ?? "unknown", now: 0 }),
    { mode: 0o555 },
  );
}

/**
 * A tree with agent `m` on model `fixture/chat` (and `more` models before it is created), a
 * workspace with hello.txt, and a running daemon.
 */
export async function world(
  server: { baseURL: string },
  o: {
    /** The primary model's native id (default fixture-model). */
    id?: string;
    limit?: number;
    fallback?: string[];
    more?: { ref: string; limit?: number; id?: string }[];
    window?: number;
    /** The primary model's driver (default openai-chat). */
    driver?: string;
    /** A key stored for provider `fixture` (slot default). */
    key?: string;
    prepare?: (f: Tree, ws: string) => void;
    /** More daemon environment (e.g. CORTEXFS_PROVIDERS). */
    env?: Record<string, string>;
  } = {},
): Promise<World> {
  const f = await makeTree();
  for (const m of o.more ?? []) addModel(f, m.ref, { baseURL: server.baseURL, ...m });
  addModel(f, "fixture/chat", {
    baseURL: server.baseURL,
    id: o.id ?? "fixture-model",
    limit: o.limit ?? 131072,
    fallback: o.fallback,
    driver: o.driver,
  });
  if (o.key) writeSecret("fixture", "default", { key: o.key, root: `${f.dir}/secrets` });
  createAgent(f.root, "m", {
    uid: 0,
    gid: 0,
    model: "fixture/chat",
    ...(o.window ? { window: String(o.window) } : {}),
  });
  const ws = await workspace(f, { "hello.txt": "hello from the workspace\n" });
  o.prepare?.(f, ws);
  const d = await startRuntimeDaemon(f, {
    env: { CORTEXFS_SECRETS: `${f.dir}/secrets`, ...o.env },
  });
  return { f, d, ws };
}

/** Stops the daemon and the server, removes the tree. */
export async function end(w: World, server?: { close(): Promise<void> }): Promise<void> {
  await w.d.stop();
  await server?.close();
  await cleanup(w.f);
}

/** `ctx agent send m INPUT` from the workspace. */
export function send(w: World, input: string, args: string[] = []): Promise<Ran> {
  return ctx(w.f, ["agent", "send", "m", ...args, input], { cwd: w.ws });
}

/** The event types of a run, in order. */
export const types = (events: Record<string, unknown>[]) => events.map((e) => e.type);
