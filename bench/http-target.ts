// The service as a client sees it: streamed chat completions over HTTP with Node's own http client (kept-alive
// connections) and a minimal SSE reader.
//
// The client shares the machine with the server it measures, so its own CPU per token is taken from the server: on
// a 2-vCPU machine at one stream, fetch (undici, WHATWG streams) used 314 µs of CPU per token and node:http 216 µs
// (AMD EPYC, 2026-11-28), while the server's whole turn between two decodes is 0.3–0.5 ms. The lighter client
// disturbs both servers less; every phase uses this one.
import { Agent, type IncomingMessage, request } from "node:http";
import { SEED, type StreamEvent, type Target } from "./workload.js";

export interface HttpTargetOptions {
  url: string;
  apiKey: string;
  model: string;
  maxTokens: number;
}

interface ChunkPayload {
  choices?: { delta?: { content?: string | null } }[];
  usage?: { completion_tokens?: number } | null;
  error?: { message?: string };
}

export function httpTarget(options: HttpTargetOptions): Target {
  // Idle kept-alive sockets do not hold the process open (the agent unrefs them).
  const agent = new Agent({ keepAlive: true });
  return (prompt) => streamCompletion(options, agent, prompt);
}

async function* streamCompletion(
  options: HttpTargetOptions,
  agent: Agent,
  prompt: string,
): AsyncGenerator<StreamEvent> {
  // A kept-alive connection the server closed while idle (llama-server closes some under 16 streams) fails the
  // request before it was answered: sent again once, on a new connection, its time counted in this request's TTFT.
  const response = await post(options, agent, prompt).catch((err: unknown) => {
    if ((err as StaleSocketError).staleSocket === true) return post(options, agent, prompt);
    throw err;
  });
  yield* readStream(response);
}

type StaleSocketError = Error & { staleSocket?: boolean };

function post(options: HttpTargetOptions, agent: Agent, prompt: string): Promise<IncomingMessage> {
  const body = JSON.stringify({
    model: options.model,
    messages: [{ role: "user", content: prompt }],
    max_tokens: options.maxTokens,
    temperature: 0,
    seed: SEED,
    stream: true,
    stream_options: { include_usage: true },
  });
  const url = new URL(`${options.url}/v1/chat/completions`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      resolve,
    );
    req.once("error", (err: StaleSocketError) => {
      if (req.reusedSocket && (err as NodeJS.ErrnoException).code === "ECONNRESET") err.staleSocket = true;
      reject(err);
    });
    req.end(body);
  });
}

async function* readStream(response: IncomingMessage): AsyncGenerator<StreamEvent> {
  response.setEncoding("utf8");
  if (response.statusCode !== 200) {
    let text = "";
    for await (const chunk of response) text += chunk;
    throw new Error(`POST /v1/chat/completions answered ${response.statusCode}: ${text}`);
  }
  let buffer = "";
  for await (const chunk of response as AsyncIterable<string>) {
    buffer += chunk;
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline).trimEnd();
      buffer = buffer.slice(newline + 1);
      newline = buffer.indexOf("\n");
      // Blank lines end events and ":" lines are keep-alive comments; the server sends one data line per event.
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      // Read on to the end of the body rather than return: leaving early would destroy the kept-alive socket.
      if (data === "[DONE]") continue;
      const payload = JSON.parse(data) as ChunkPayload;
      if (payload.error !== undefined) throw new Error(`stream error: ${payload.error.message ?? data}`);
      const content = payload.choices?.[0]?.delta?.content;
      if (typeof content === "string" && content.length > 0) yield { type: "text" };
      const tokens = payload.usage?.completion_tokens;
      if (typeof tokens === "number") yield { type: "done", completionTokens: tokens };
    }
  }
}
