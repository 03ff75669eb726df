// A generation answered as an SSE response, the same way on every endpoint that streams one: the error frame and
// its log line, a reader that stalls, the headers. The endpoint supplies only how its events are written.
import type { Context } from "hono";
import type { Logger } from "../observability/logger.js";
import type { AppEnv } from "./env.js";
import { ApiError, type ErrorBody } from "./errors/api-error.js";
import { domainApiError, mapDomainError } from "./errors/domain-errors.js";
import { nodeBindings } from "./node-request.js";
import {
  RESPONSE_ALREADY_SENT_HEADER,
  type SseStreamOptions,
  type SseWriter,
  sseHeaders,
  sseStream,
  sseToNode,
} from "./sse.js";

export interface GenerationStreamOptions {
  logger: Logger;
  requestId: string;
  /** Aborted when the client goes or stalls: the generation stops. */
  left: AbortController;
  /** Longest a full stream may wait for a reader that takes nothing; then the connection is destroyed. */
  drainTimeoutMs: number;
  /** How long the stream may be silent (a long prompt being evaluated) before a `: keep-alive` comment. */
  keepAliveMs: number;
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

/**
 * The 200 SSE response whose body `produce` writes. On a Node connection the stream is written straight to the
 * socket (no WHATWG stream between: a gateway relays every token through here) and Hono is handed a response that
 * says so; an in-memory request gets a streaming body.
 */
export function generationStreamResponse(
  c: Context<AppEnv>,
  produce: (writer: SseWriter) => Promise<void>,
  options: GenerationStreamOptions,
): Response {
  const { logger, requestId, drainTimeoutMs, keepAliveMs } = options;
  const node = nodeBindings(c);
  const sse: SseStreamOptions = {
    drainTimeoutMs,
    keepAliveMs,
    onClientGone: () => options.left.abort(),
    onStalled: () => {
      logger.warn(
        { requestId, drainTimeoutMs },
        "client stopped reading the stream: connection destroyed, generation stopped",
      );
      node?.outgoing.destroy();
      return node !== undefined;
    },
  };
  const headers = {
    ...sseHeaders(node?.incoming.httpVersion),
    ...options.headers,
    "x-request-id": requestId,
  };
  if (node === undefined) return new Response(sseStream(produce, sse), { status: 200, headers });
  node.outgoing.writeHead(200, headers);
  // The producers report their own failures in the stream; anything escaping them is a bug of ours.
  sseToNode(node.outgoing, produce, sse).catch((err: unknown) =>
    logger.error({ err, requestId }, "error during stream"),
  );
  // The headers sent, for the middleware that reads them (the request log, the rate-limit headers' check).
  return new Response(null, { status: 200, headers: { ...headers, [RESPONSE_ALREADY_SENT_HEADER]: "true" } });
}
