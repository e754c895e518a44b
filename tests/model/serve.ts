/**
 * The fixture model server as a process of its own (run it in a network namespace of its own for
 * a fixed port): `serve.ts PORT REPLY [HELD]` answers Chat Completions on 127.0.0.1:PORT with the
 * fixture REPLY (tests/fixtures/openai/REPLY.json), holding its stream after the first `HELD`
 * content chunks when `HELD` is given. Prints `ready` once listening. Stdin: whatever comes ends
 * the held stream with the rest of the reply; at its end the requests seen are printed as one JSON
 * line and the server exits.
 */
import { fixture, OpenAIServer } from "./openai_server.ts";

const [port, name, held] = Deno.args;
const reply = fixture(name);
const server = new OpenAIServer({ port: Number(port) });
const chunks = reply.chunks ?? [];
const cut = held === undefined ? chunks.length : Number(held) + 1; // the role chunk first
server.push(cut < chunks.length ? { ...reply, chunks: chunks.slice(0, cut), hold: true } : reply);
console.log("ready");
for await (const _ of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
  server.finish(chunks.slice(cut));
}
console.log(JSON.stringify(server.requests));
await server.close();
