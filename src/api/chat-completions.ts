// POST /v1/chat/completions: parse → access → admit → stream SSE chunks or one JSON body.
import { randomInt } from "node:crypto";
import type { Context } from "hono";
import type { AppEnv } from "../app/env.js";
import { mapDomainError } from "../app/error-mapping.js";
import type { Services } from "../app/services.js";
import type {
  FinishReason,
  Generation,
  GenerationEvent,
  GenerationRequest,
  UsageCounts,
} from "../engine/types.js";
import { toApiError } from "../errors/api-error.js";
import { type ParsedChatRequest, parseChatRequest, parseJsonBody } from "./chat-request.js";
import { assertModelAccess } from "./model-access.js";
import { SSE_HEADERS, type SseWriter, sseStream } from "./sse.js";
import { completionId, toUsage } from "./wire.js";

export async function chatCompletions(c: Context<AppEnv>, services: Services): Promise<Response> {
  const body = parseJsonBody(await c.req.text());
  const parsed = parseChatRequest(body, { maxN: services.config.server.maxN });
  const principal = c.get("principal");
  await assertModelAccess(services, principal, parsed.model);

  const abort = new AbortController();
  onClientClose(c, () => abort.abort());
  const request: GenerationRequest = {
    model: parsed.model,
    messages: parsed.messages,
    enableThinking: parsed.enableThinking,
    n: parsed.n,
    sampling: { ...parsed.sampling, seed: parsed.sampling.seed ?? randomInt(2 ** 31) },
    cacheScope: principal.orgId,
    signal: abort.signal,
  };
  let generation: Generation;
  try {
    generation = await services.engine.generate(request);
  } catch (err) {
    throw mapDomainError(err);
  }
  const meta = { id: completionId(), created: Math.floor(Date.now() / 1000), model: parsed.model };
  if (parsed.stream) {
    const stream = sseStream(
      (writer) => streamChunks(writer, generation, parsed, meta, services, c.get("requestId")),
      () => abort.abort(),
    );
    return new Response(stream, { status: 200, headers: SSE_HEADERS });
  }
  return c.json(await collect(generation, parsed, meta));
}

interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

/** Non-streamed body: every choice's text, finish reason and the usage. */
async function collect(generation: Generation, parsed: ParsedChatRequest, meta: CompletionMeta) {
  const texts: string[] = Array.from({ length: parsed.n }, () => "");
  const reasons: (FinishReason | null)[] = Array.from({ length: parsed.n }, () => null);
  let usage: UsageCounts | undefined;
  for await (const event of generation.events) {
    if (event.type === "delta") texts[event.choice] += event.text;
    else if (event.type === "finish") reasons[event.choice] = event.reason;
    else usage = event.usage;
  }
  return {
    id: meta.id,
    object: "chat.completion" as const,
    created: meta.created,
    model: meta.model,
    choices: texts.map((content, index) => ({
      index,
      message: { role: "assistant" as const, content, refusal: null },
      logprobs: null,
      finish_reason: reasons[index] ?? "stop",
    })),
    usage: toUsage(usage ?? { promptTokens: generation.promptTokens, completionTokens: 0, cachedTokens: 0 }),
    system_fingerprint: null,
  };
}

async function streamChunks(
  writer: SseWriter,
  generation: Generation,
  parsed: ParsedChatRequest,
  meta: CompletionMeta,
  services: Services,
  requestId: string,
): Promise<void> {
  const keepAliveMs = services.config.server.keepAliveMs;
  const usageField = parsed.includeUsage ? { usage: null } : {};
  const chunk = (choices: unknown[]) => ({
    id: meta.id,
    object: "chat.completion.chunk" as const,
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices,
    ...usageField,
  });
  for (let index = 0; index < parsed.n; index++) {
    await writer.data(
      chunk([{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]),
    );
  }
  const iterator = generation.events[Symbol.asyncIterator]();
  try {
    while (writer.open) {
      const next = await nextWithKeepAlive(iterator, writer, keepAliveMs);
      if (next.done === true) break;
      const event: GenerationEvent = next.value;
      if (event.type === "delta") {
        await writer.data(
          chunk([
            { index: event.choice, delta: { content: event.text }, logprobs: null, finish_reason: null },
          ]),
        );
      } else if (event.type === "finish") {
        await writer.data(
          chunk([{ index: event.choice, delta: {}, logprobs: null, finish_reason: event.reason }]),
        );
      } else if (parsed.includeUsage) {
        await writer.data({ ...chunk([]), usage: toUsage(event.usage) });
      }
    }
    await writer.done();
  } catch (err) {
    // After the 200 the only way to report a failure is in the stream itself, as OpenAI does.
    const apiError = toApiError(mapDomainError(err));
    services.logger.error({ err, requestId }, "error during stream");
    await writer.error(apiError.toBody());
    await writer.done();
  }
}

/** Waits for the next event, sending `: keep-alive` comments while a long prompt is being evaluated. */
async function nextWithKeepAlive<T>(
  iterator: AsyncIterator<T>,
  writer: SseWriter,
  keepAliveMs: number,
): Promise<IteratorResult<T>> {
  const next = iterator.next();
  while (true) {
    let timer: NodeJS.Timeout | undefined;
    const tick = new Promise<"tick">((resolve) => {
      timer = setTimeout(() => resolve("tick"), keepAliveMs);
    });
    const result = await Promise.race([next, tick]);
    clearTimeout(timer);
    if (result !== "tick") return result;
    if (!writer.open) return { done: true, value: undefined };
    await writer.comment("keep-alive");
  }
}

/** Cancels generation when the client disconnects before a non-streamed body is sent. */
function onClientClose(c: Context<AppEnv>, cancel: () => void): void {
  const outgoing = (c.env as { outgoing?: import("node:http").ServerResponse } | undefined)?.outgoing;
  outgoing?.once("close", () => {
    if (!outgoing.writableFinished) cancel();
  });
}
