// POST /v1/chat/completions: parse → access → admit → stream SSE chunks or one JSON body.
import { randomInt } from "node:crypto";
import { performance } from "node:perf_hooks";
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
import { rateLimitHeaders } from "../limits/headers.js";
import type { Admission } from "../limits/types.js";
import { type ParsedChatRequest, parseChatRequest, parseJsonBody } from "./chat-request.js";
import { assertModelAccess } from "./model-access.js";
import { SSE_HEADERS, type SseWriter, sseStream } from "./sse.js";
import {
  type ChunkDelta,
  completionId,
  type ResponseMessage,
  type ToolCall,
  toolCallId,
  toUsage,
} from "./wire.js";

export async function chatCompletions(c: Context<AppEnv>, services: Services): Promise<Response> {
  const startedAt = performance.now();
  const body = parseJsonBody(await c.req.text());
  const parsed = parseChatRequest(body, { maxN: services.config.server.maxN });
  const principal = c.get("principal");
  await assertModelAccess(services, principal, parsed.model);
  c.set("model", parsed.model);

  const abort = new AbortController();
  onClientClose(c, () => abort.abort());
  let admission: Admission | undefined;
  const request: GenerationRequest = {
    model: parsed.model,
    messages: parsed.messages,
    enableThinking: parsed.enableThinking,
    n: parsed.n,
    sampling: { ...parsed.sampling, seed: parsed.sampling.seed ?? randomInt(2 ** 31) },
    cacheScope: principal.orgId,
    signal: abort.signal,
    // Rate limits are charged once the prompt's size is known and before the engine queues the request.
    // Without max_tokens the budget is the rest of the context: an upper bound, lowered to the TPM limit if need be.
    admit: async (promptTokens, maxTokens) => {
      const bound = parsed.sampling.maxTokens === undefined ? { minTokens: promptTokens } : {};
      admission = await services.limiter.admit(principal, promptTokens + maxTokens, bound);
    },
    ...(parsed.output === undefined ? {} : { output: parsed.output }),
  };
  let admitted: Generation;
  try {
    admitted = await services.engine.generate(request);
  } catch (err) {
    // Refused after the limiter charged it (overloaded, timed out, client left): the charge is given back.
    await admission?.refund().catch((refundErr: unknown) => {
      services.logger.warn(
        { err: refundErr, requestId: c.get("requestId") },
        "refunding a rate-limit charge failed",
      );
    });
    throw mapDomainError(err);
  }
  const generation = services.accounting.meter(admitted, {
    principal,
    model: parsed.model,
    requestId: c.get("requestId"),
    startedAt,
    admission,
    signal: abort.signal,
  });
  const headers = admission === undefined ? {} : rateLimitHeaders(admission.snapshot);
  const meta = { id: completionId(), created: Math.floor(Date.now() / 1000), model: parsed.model };
  if (parsed.stream) {
    const stream = sseStream(
      (writer) => streamChunks(writer, generation, parsed, meta, services, c.get("requestId")),
      () => abort.abort(),
    );
    return new Response(stream, { status: 200, headers: { ...SSE_HEADERS, ...headers } });
  }
  const completion = await collect(generation, parsed, meta, (invalid) => logInvalid(services, c, invalid));
  return c.json(completion, 200, headers);
}

interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

interface ChoiceAccumulator {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  reason: FinishReason | null;
}

/** Non-streamed body: every choice's message (content, reasoning, tool calls), finish reason and the usage. */
async function collect(
  generation: Generation,
  parsed: ParsedChatRequest,
  meta: CompletionMeta,
  onInvalid: (invalid: string) => void,
) {
  const choices: ChoiceAccumulator[] = Array.from({ length: parsed.n }, () => ({
    content: "",
    reasoning: "",
    toolCalls: [],
    reason: null,
  }));
  let usage: UsageCounts | undefined;
  for await (const event of generation.events) {
    if (event.type === "usage") {
      usage = event.usage;
      continue;
    }
    const choice = choices[event.choice] as ChoiceAccumulator;
    if (event.type === "finish") {
      choice.reason = event.reason;
      if (event.invalid !== undefined) onInvalid(event.invalid);
      continue;
    }
    const target = event.target;
    if (target === undefined) choice.content += event.text;
    else if (target.kind === "reasoning") choice.reasoning += event.text;
    else if (target.name !== undefined) {
      choice.toolCalls.push({
        id: toolCallId(),
        type: "function",
        function: { name: target.name, arguments: "" },
      });
    } else {
      const call = choice.toolCalls[target.call];
      if (call !== undefined) call.function.arguments += event.text;
    }
  }
  return {
    id: meta.id,
    object: "chat.completion" as const,
    created: meta.created,
    model: meta.model,
    choices: choices.map((choice, index) => ({
      index,
      message: responseMessage(choice, parsed.enableThinking),
      logprobs: null,
      finish_reason: choice.reason ?? "stop",
    })),
    usage: toUsage(usage ?? { promptTokens: generation.promptTokens, completionTokens: 0, cachedTokens: 0 }),
    system_fingerprint: null,
  };
}

function responseMessage(choice: ChoiceAccumulator, reasoning: boolean): ResponseMessage {
  const calls = choice.toolCalls.length > 0;
  const message: ResponseMessage = {
    role: "assistant",
    content: calls ? null : choice.content,
    refusal: null,
  };
  if (reasoning) message.reasoning = choice.reasoning;
  if (calls) message.tool_calls = choice.toolCalls;
  return message;
}

/** Output that failed its post-generation check: the grammar should make this impossible, so it is worth a log. */
function logInvalid(services: Services, c: Context<AppEnv>, invalid: string): void {
  services.logger.warn({ requestId: c.get("requestId"), invalid }, "structured output failed validation");
}

/** An engine delta as a chunk delta; tool calls get their id on their first fragment. */
function chunkDelta(event: Extract<GenerationEvent, { type: "delta" }>): ChunkDelta {
  const target = event.target;
  if (target === undefined) return { content: event.text };
  if (target.kind === "reasoning") return { reasoning: event.text };
  if (target.name !== undefined) {
    return {
      tool_calls: [
        {
          index: target.call,
          id: toolCallId(),
          type: "function",
          function: { name: target.name, arguments: event.text },
        },
      ],
    };
  }
  return { tool_calls: [{ index: target.call, function: { arguments: event.text } }] };
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
  // A reply that must be tool calls has no content: say so from the first chunk, as OpenAI does.
  const choice = parsed.output?.toolChoice;
  const callsOnly = choice === "required" || typeof choice === "object";
  for (let index = 0; index < parsed.n; index++) {
    await writer.data(
      chunk([
        {
          index,
          delta: { role: "assistant", content: callsOnly ? null : "" },
          logprobs: null,
          finish_reason: null,
        },
      ]),
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
          chunk([{ index: event.choice, delta: chunkDelta(event), logprobs: null, finish_reason: null }]),
        );
      } else if (event.type === "finish") {
        if (event.invalid !== undefined) {
          services.logger.warn({ requestId, invalid: event.invalid }, "structured output failed validation");
        }
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
