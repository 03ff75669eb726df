// A generation answered as an SSE response, the same way on every endpoint that streams one: the error frame and
// its log line, a reader that stalls, the headers. The endpoint supplies only how its events are written.
import type { Context } from "hono";
import type { Logger } from "../observability/logger.js";
import type { AppEnv } from "./env.js";
import { ApiError, type ErrorBody } from "./errors/api-error.js";
import { domainApiError, mapDomainError } from "./errors/domain-errors.js";
import { nodeBindings } from "./node-request.js";
import { type SseWriter, sseHeaders, sseStream } from "./sse.js";

export interface GenerationStreamOptions {
  logger: Logger;
  requestId: string;
  /** Aborted when the client goes or stalls: the generation stops. */
  left: AbortController;
  /** Longest a full stream may wait for a reader that takes nothing; then the connection is destroyed. */
  drainTimeoutMs: number;
  /** Headers beside the SSE ones and x-request-id (the x-ratelimit-* of the request's charge). */
  headers: Record<string, string>;
}

/**
 * The error frame for a failure after the 200: an expected one (an upstream that broke off, shutdown) was logged
 * where it happened, with its cause, so an info line ties it to this response; anything else is a bug: error
 * level, with its stack (docs/operations.md, "Log levels").
 */
export function streamErrorFrame(logger: Logger, requestId: string): (err: unknown) => ErrorBody {
  return (err) => {
    const api = mapDomainError(err);
    if (err instanceof ApiError || domainApiError(err) !== undefined) {
      logger.info({ requestId, status: api.status, code: api.code }, "stream ended with an error frame");
    } else {
      logger.error({ err, requestId }, "error during stream");
    }
    return api.toBody();
  };
}

/** The 200 SSE response whose body `produce` writes. */
export function generationStreamResponse(
  c: Context<AppEnv>,
  produce: (writer: SseWriter) => Promise<void>,
  options: GenerationStreamOptions,
): Response {
  const { logger, requestId, drainTimeoutMs } = options;
  const stream = sseStream(produce, {
    drainTimeoutMs,
    onClientGone: () => options.left.abort(),
    onStalled: () => {
      logger.warn(
        { requestId, drainTimeoutMs },
        "client stopped reading the stream: connection destroyed, generation stopped",
      );
      const outgoing = nodeBindings(c)?.outgoing;
      outgoing?.destroy();
      return outgoing !== undefined;
    },
  });
  const httpVersion = nodeBindings(c)?.incoming.httpVersion;
  return new Response(stream, {
    status: 200,
    headers: { ...sseHeaders(httpVersion), ...options.headers, "x-request-id": requestId },
  });
}
