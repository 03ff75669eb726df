// POST /v1/chat/completions: parse → completions service → SSE chunks or one JSON body.
import { performance } from "node:perf_hooks";
import type { Context } from "hono";
import type { SchemaBudget } from "../../chat/schema/budget.js";
import type { CompletionsService } from "../../completions/completions-service.js";
import type { RequestLimits } from "../../config/schema.js";
import { callsRequired } from "../../engine/types.js";
import type { Logger } from "../../observability/logger.js";
import type { Metrics } from "../../observability/metrics.js";
import { arrivalOf } from "../arrivals.js";
import type { AppEnv } from "../env.js";
import { generationStreamResponse, streamErrorFrame } from "../generation-stream.js";
import { clientLeftSignal, readBodyText } from "../node-request.js";
import { completionBody } from "../openai/chat-completion-body.js";
import { streamCompletion } from "../openai/chat-completion-stream.js";
import { parseChatRequest } from "../openai/chat-request.js";
import { type CompletionMeta, completionId } from "../openai/wire.js";
import { rateLimitHeaders } from "../rate-limit-headers.js";
import { sessionIdOf } from "../session-id.js";
import { parseJsonBody } from "../validation.js";

export interface ChatCompletionsDeps {
  completions: CompletionsService;
  logger: Logger;
  /** Counts replies whose structured output failed the check after generation. */
  metrics?: Pick<Metrics, "structuredOutputInvalid">;
  /**
   * Largest n, the body's size and the other bounds of a request, what its schemas may cost, how often a silent
   * stream sends a keep-alive comment, and how long a stream may wait for a client that reads nothing before it is
   * destroyed.
   */
  limits: {
    maxN: number;
    maxBodyBytes: number;
    keepAliveMs: number;
    sseDrainTimeoutMs: number;
    requestLimits: RequestLimits;
    schemaBudget?: SchemaBudget;
  };
}

export async function chatCompletions(c: Context<AppEnv>, deps: ChatCompletionsDeps): Promise<Response> {
  const startedAt = performance.now();
  const requestId = c.get("requestId");
  // The connection closing before the response is done, or the stream's reader cancelling, means the client left.
  const left = new AbortController();
  const signal = clientLeftSignal(c, left);
  // The service counts the request (RPM) before the body is read and validated: see CompletionsService.start.
  const read = async () => {
    const text = await readBodyText(c, deps.limits.maxBodyBytes);
    const request = parseChatRequest(parseJsonBody(text), deps.limits);
    c.set("model", request.model);
    const sessionId = sessionIdOf(c);
    return sessionId === undefined ? request : { ...request, sessionId };
  };
  const {
    generation,
    rateLimit,
    request: parsed,
  } = await deps.completions.start(read, {
    principal: c.get("principal"),
    requestId,
    startedAt,
    signal,
    arrived: arrivalOf(c),
  });

  const headers = rateLimitHeaders(rateLimit);
  const meta: CompletionMeta = {
    id: completionId(),
    created: Math.floor(Date.now() / 1000),
    model: parsed.model,
  };
  // The reply is still returned as generated (its text may already be streamed): logged and counted.
  const onInvalid = (invalid: string) => {
    deps.logger.warn({ requestId, invalid }, "structured output failed validation");
    deps.metrics?.structuredOutputInvalid(parsed.model);
  };
  if (!parsed.stream) {
    const body = await completionBody(generation, meta, {
      n: parsed.n,
      reasoning: parsed.enableThinking,
      logprobs: parsed.sampling.logprobs !== undefined,
      legacyFunctions: parsed.legacyFunctions,
      onInvalid,
    });
    return c.json(body, 200, headers);
  }
  const toolChoice = parsed.output?.toolChoice;
  return generationStreamResponse(
    c,
    (writer) =>
      streamCompletion(writer, generation.events, meta, {
        n: parsed.n,
        includeUsage: parsed.includeUsage,
        callsOnly: callsRequired(toolChoice),
        legacyFunctions: parsed.legacyFunctions,
        onInvalid,
        onError: streamErrorFrame(deps.logger, requestId),
      }),
    {
      logger: deps.logger,
      requestId,
      left,
      drainTimeoutMs: deps.limits.sseDrainTimeoutMs,
      keepAliveMs: deps.limits.keepAliveMs,
      headers,
    },
  );
}
