/** A local model server for tests: replays recorded SSE shapes from tests/fixtures/<wire>/ (Chat Completions, Responses, Anthropic Messages). */

const FIXTURES = new URL("../fixtures/", import.meta.url).pathname;

/**
 * One recorded reply: a JSON error (`status` + `body`); an SSE stream of `chunks` (Chat
 * Completions: `data:` lines, then `data: [DONE]`); or of `events` (Responses and Anthropic:
 * `event: <type>` and `data:` lines, no `[DONE]`, the stream just ends).
 */
export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  chunks?: unknown[];
  events?: { type: string }[];
  /** Keep the stream open after the chunks (no `[DONE]`), until the client goes away. */
  hold?: boolean;
  /** Then send `chunk` `times` times more, each only when the client has read the one before. */
  repeat?: { chunk: unknown; times: number };
}

/** Loads `tests/fixtures/<wire>/<name>.json` (wire: openai, responses, anthropic). */
export function fixture(name: string, wire = "openai"): Reply {
  return JSON.parse(Deno.readTextFileSync(`${FIXTURES}${wire}/${name}.json`));
}

/** What the server saw of one request. */
export interface Seen {
  path: string;
  authorization: string | null;
  /** The `x-api-key` header (Anthropic). */
  apiKey: string | null;
  body: {
    [k: string]: unknown;
    model?: string;
    stream?: boolean;
    stream_options?: unknown;
    messages?: { role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: string }[];
    tools?: { type: string; function: { name: string } }[];
  };
}

/** A running fixture server answering each POST to its path with the next queued reply. */
export class OpenAIServer {
  /** The path requests must use (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`). */
  readonly path: string;
  readonly requests: Seen[] = [];
  /** Resolves when a held stream was cancelled by the client closing the connection. */
  readonly closed: Promise<void>;
  /** How many `repeat` chunks were sent so far. */
  repeated = 0;
  /** Resolves when a `repeat` stream was queued to its end (the client kept reading). */
  readonly ended: Promise<void>;
  #ended!: () => void;
  #queue: Reply[] = [];
  #held: ReadableStreamDefaultController<Uint8Array>[] = [];
  #server: Deno.HttpServer<Deno.NetAddr>;
  #closed!: () => void;

  /** `port`: a fixed one (default any free port), for a server in a network namespace of its own. */
  constructor(options: { path?: string; port?: number } = {}) {
    this.path = options.path ?? "/v1/chat/completions";
    this.closed = new Promise((r) => (this.#closed = r));
    this.ended = new Promise((r) => (this.#ended = r));
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: options.port ?? 0, onListen() {} },
      (req) => this.#answer(req),
    );
  }

  /** Base URL for a model's `default` control (`.../v1`). */
  get baseURL(): string {
    return `http://127.0.0.1:${this.#server.addr.port}/v1`;
  }

  /** Queues replies, answered in order. */
  push(...replies: Reply[]): void {
    this.#queue.push(...replies);
  }

  async #answer(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const body = await req.json().catch(() => ({}));
    this.requests.push({
      path,
      authorization: req.headers.get("authorization"),
      apiKey: req.headers.get("x-api-key"),
      body,
    });
    const r = this.#queue.shift();
    if (!r || path !== this.path) {
      return Response.json({ error: { message: "no reply queued", type: "test" } }, {
        status: 500,
      });
    }
    if (r.chunks === undefined && r.events === undefined) {
      return new Response(JSON.stringify(r.body ?? {}), { status: r.status, headers: r.headers });
    }
    const enc = new TextEncoder();
    const closed = this.#closed;
    const held = this.#held;
    const extra = r.repeat && enc.encode(`data: ${JSON.stringify(r.repeat.chunk)}\n\n`);
    let left = r.repeat?.times ?? 0;
    const count = () => this.repeated++;
    const ended = this.#ended;
    const stream = new ReadableStream<Uint8Array>({
      // No queue beyond one chunk: a client that stops reading stops the repeats.
      pull(c) {
        if (!extra || left === 0) return;
        left--;
        count();
        c.enqueue(extra);
        if (left === 0) {
          c.enqueue(enc.encode("data: [DONE]\n\n"));
          c.close();
          ended();
        }
      },
      start(c) {
        for (const chunk of r.chunks ?? []) {
          c.enqueue(enc.encode(`data: ${JSON.stringify(chunk)}\n\n`));
        }
        for (const e of r.events ?? []) {
          c.enqueue(enc.encode(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`));
        }
        if (r.hold) held.push(c);
        else if (extra) return;
        else {
          if (r.chunks) c.enqueue(enc.encode("data: [DONE]\n\n"));
          c.close();
        }
      },
      cancel() {
        closed();
      },
    });
    return new Response(stream, {
      status: r.status,
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache", ...r.headers },
    });
  }

  /** Ends every held stream (a `hold` reply) with `chunks`, then `data: [DONE]`. */
  finish(chunks: unknown[]): void {
    const enc = new TextEncoder();
    for (const c of this.#held.splice(0)) {
      for (const chunk of chunks) c.enqueue(enc.encode(`data: ${JSON.stringify(chunk)}\n\n`));
      c.enqueue(enc.encode("data: [DONE]\n\n"));
      c.close();
    }
  }

  /** Stops serving. */
  async close(): Promise<void> {
    for (const c of this.#held) {
      try {
        c.close();
      } catch { /* the client already went away */ }
    }
    await this.#server.shutdown();
  }
}
