// A synthetic upstream engine for the gateway bench: an OpenAI-compatible server that generates nothing and
// answers at once, so what a gateway in front of it spends is measured alone. A streamed chat completion is
// `max_tokens` chunks of one token each (vLLM's chunk shape: one per token), written as fast as the reader takes
// them, then the finish chunk, the usage chunk and [DONE]; a non-streamed one is one JSON body. It also answers
// the probes a gateway sends (`GET /v1/models`, `GET /health`).
// `node --import tsx bench/synthetic-upstream.ts` prints its URL (`http://127.0.0.1:PORT/v1`) on stdout.
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";

/** The model it serves: its tokens as fast as the reader takes them. */
export const SYNTHETIC_MODEL = "synthetic";
/**
 * The same, paced as a GPU engine serves many sequences: one token per stream every PACE_MS (a decode step), so
 * each token reaches the gateway in a read of its own, as it does from a real fleet.
 */
export const PACED_MODEL = "synthetic-paced";
export const PACE_MS = 10;
/** Tokens a request gets when it names no max_tokens. */
const DEFAULT_TOKENS = 16;
/**
 * The tokens the chunks carry in turn (common English words, each a token with its leading space): not one token
 * repeated, which LiteLLM's proxy takes for a model stuck in a loop and ends with an error after 100 chunks.
 */
export const TOKENS: readonly string[] = [
  " the",
  " of",
  " and",
  " to",
  " in",
  " a",
  " is",
  " that",
  " for",
  " it",
  " as",
  " was",
  " with",
  " be",
  " by",
  " on",
];
const PROMPT_TOKENS = 24;

function chunk(id: string, created: number, choice: Record<string, unknown>, usage?: unknown): string {
  const body = { id, object: "chat.completion.chunk", created, model: SYNTHETIC_MODEL, choices: [choice] };
  return `data: ${JSON.stringify(usage === undefined ? body : { ...body, choices: [], usage })}\n\n`;
}

function usageOf(completion: number) {
  return {
    prompt_tokens: PROMPT_TOKENS,
    completion_tokens: completion,
    total_tokens: PROMPT_TOKENS + completion,
    prompt_tokens_details: { cached_tokens: 0 },
  };
}

let served = 0;

function waitDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

async function stream(res: ServerResponse, tokens: number, paced: boolean): Promise<void> {
  const id = `chatcmpl-synthetic-${++served}`;
  const created = Math.floor(Date.now() / 1000);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const frames = TOKENS.map((token) =>
    Buffer.from(
      chunk(id, created, { index: 0, delta: { content: token }, logprobs: null, finish_reason: null }),
    ),
  );
  res.write(chunk(id, created, { index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }));
  for (let i = 0; i < tokens; i++) {
    if (res.destroyed) return;
    if (paced) await new Promise((resolve) => setTimeout(resolve, PACE_MS));
    // One write per token, as an engine sends each token when it is sampled; a full socket waits for the reader.
    if (!res.write(frames[i % frames.length] as Buffer)) await waitDrain(res);
  }
  res.write(chunk(id, created, { index: 0, delta: {}, logprobs: null, finish_reason: "length" }));
  res.write(chunk(id, created, {}, usageOf(tokens)));
  res.end("data: [DONE]\n\n");
}

function complete(res: ServerResponse, tokens: number): void {
  const body = {
    id: `chatcmpl-synthetic-${++served}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: SYNTHETIC_MODEL,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: Array.from({ length: tokens }, (_, i) => TOKENS[i % TOKENS.length]).join(""),
        },
        logprobs: null,
        finish_reason: "length",
      },
    ],
    usage: usageOf(tokens),
  };
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  if (req.method === "GET") {
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          object: "list",
          data: [SYNTHETIC_MODEL, PACED_MODEL].map((id) => ({
            id,
            object: "model",
            created: 0,
            owned_by: "bench",
            max_model_len: 1_000_000,
          })),
        }),
      );
      return;
    }
    res.writeHead(req.url === "/health" ? 200 : 404);
    res.end();
    return;
  }
  const parts: Buffer[] = [];
  req.on("data", (part: Buffer) => parts.push(part));
  req.on("end", () => {
    let body: { model?: string; stream?: boolean; max_tokens?: number; max_completion_tokens?: number };
    try {
      body = JSON.parse(Buffer.concat(parts).toString("utf8")) as typeof body;
    } catch {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "not JSON", type: "invalid_request_error" } }));
      return;
    }
    const tokens = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_TOKENS;
    if (body.stream === true) void stream(res, tokens, body.model === PACED_MODEL);
    else complete(res, tokens);
  });
});
server.keepAliveTimeout = 60_000;
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1\n`);
  });
}
