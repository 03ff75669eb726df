// The service as a client sees it: streamed chat completions over HTTP with plain fetch and a minimal SSE reader.
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
  return (prompt) => streamCompletion(options, prompt);
}

async function* streamCompletion(options: HttpTargetOptions, prompt: string): AsyncGenerator<StreamEvent> {
  const send = () => post(options, prompt);
  // A kept-alive connection the server closed while idle (llama-server closes some under 16 streams) fails the
  // request before it was sent: sent again once, on a new connection, its time counted in this request's TTFT.
  const response = await send().catch((err: unknown) => {
    if ((err as { cause?: { code?: string } }).cause?.code === "UND_ERR_SOCKET") return send();
    throw err;
  });
  yield* readStream(response);
}

function post(options: HttpTargetOptions, prompt: string): Promise<Response> {
  return fetch(`${options.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${options.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: options.model,
      messages: [{ role: "user", content: prompt }],
      max_tokens: options.maxTokens,
      temperature: 0,
      seed: SEED,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
}

async function* readStream(response: Response): AsyncGenerator<StreamEvent> {
  if (!response.ok || response.body === null) {
    throw new Error(`POST /v1/chat/completions answered ${response.status}: ${await response.text()}`);
  }
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline).trimEnd();
      buffer = buffer.slice(newline + 1);
      newline = buffer.indexOf("\n");
      // Blank lines end events and ":" lines are keep-alive comments; the server sends one data line per event.
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") return;
      const payload = JSON.parse(data) as ChunkPayload;
      if (payload.error !== undefined) throw new Error(`stream error: ${payload.error.message ?? data}`);
      const content = payload.choices?.[0]?.delta?.content;
      if (typeof content === "string" && content.length > 0) yield { type: "text" };
      const tokens = payload.usage?.completion_tokens;
      if (typeof tokens === "number") yield { type: "done", completionTokens: tokens };
    }
  }
}
