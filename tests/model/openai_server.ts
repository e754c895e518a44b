/** A local OpenAI Chat Completions server for tests: replays recorded SSE shapes from tests/fixtures/openai/. */

const FIXTURES = new URL("../fixtures/openai/", import.meta.url).pathname;

/** One recorded reply: a JSON error (`status` + `body`) or an SSE stream of `chunks`. */
export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  chunks?: unknown[];
  /** Keep the stream open after the chunks (no `[DONE]`), until the client goes away. */
  hold?: boolean;
}

/** Loads `tests/fixtures/openai/<name>.json`. */
export function fixture(name: string): Reply {
  return JSON.parse(Deno.readTextFileSync(`${FIXTURES}${name}.json`));
}

/** What the server saw of one request. */
export interface Seen {
  path: string;
  authorization: string | null;
  body: {
    model?: string;
    stream?: boolean;
    stream_options?: unknown;
    messages?: { role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: string }[];
    tools?: { type: string; function: { name: string } }[];
  };
}

/** A running fixture server answering each POST .../chat/completions with the next queued reply. */
export class OpenAIServer {
  readonly requests: Seen[] = [];
  /** Resolves when a held stream was cancelled by the client closing the connection. */
  readonly closed: Promise<void>;
  #queue: Reply[] = [];
  #held: ReadableStreamDefaultController<Uint8Array>[] = [];
  #server: Deno.HttpServer<Deno.NetAddr>;
  #closed!: () => void;

  constructor() {
    this.closed = new Promise((r) => (this.#closed = r));
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
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
    this.requests.push({ path, authorization: req.headers.get("authorization"), body });
    const r = this.#queue.shift();
    if (!r || path !== "/v1/chat/completions") {
      return Response.json({ error: { message: "no reply queued", type: "test" } }, {
        status: 500,
      });
    }
    if (r.chunks === undefined) {
      return new Response(JSON.stringify(r.body ?? {}), { status: r.status, headers: r.headers });
    }
    const enc = new TextEncoder();
    const closed = this.#closed;
    const held = this.#held;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const chunk of r.chunks ?? []) {
          c.enqueue(enc.encode(`data: ${JSON.stringify(chunk)}\n\n`));
        }
        if (r.hold) held.push(c);
        else {
          c.enqueue(enc.encode("data: [DONE]\n\n"));
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
