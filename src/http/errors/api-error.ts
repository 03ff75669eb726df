// The HTTP-edge error hierarchy and its one serialisation to OpenAI's {"error":{...}} body.
import type { ErrorCode, ErrorType } from "./error-codes.js";

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: ErrorCode | null };
}

export interface ApiErrorOptions {
  param?: string | null;
  code?: ErrorCode | null;
  headers?: Record<string, string>;
  cause?: unknown;
}

/** An error that knows its HTTP status and OpenAI body. Middleware and handlers throw these; app/ renders them. */
export class ApiError extends Error {
  readonly param: string | null;
  readonly code: ErrorCode | null;
  readonly headers: Record<string, string>;

  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.param = options.param ?? null;
    this.code = options.code ?? null;
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400: the request was malformed or a parameter was invalid. */
export class InvalidRequestError extends ApiError {
  constructor(
    message: string,
    param: string | null = null,
    code: ErrorCode | null = "invalid_request_error",
  ) {
    super(400, "invalid_request_error", message, { param, code });
  }
}

/** 400 with code context_length_exceeded (param messages), as OpenAI answers. */
export class ContextLengthError extends ApiError {
  constructor(message: string) {
    super(400, "invalid_request_error", message, { param: "messages", code: "context_length_exceeded" });
  }
}

/** 401: missing or invalid API key. The spec shows type invalid_request_error for this case. */
export class InvalidApiKeyError extends ApiError {
  constructor(message = "Incorrect API key provided. You can find your API keys in the Hearth dashboard.") {
    super(401, "invalid_request_error", message, { code: "invalid_api_key" });
  }
}

/** 401 on the admin API: the admin token is missing or wrong. */
export class AdminAuthError extends ApiError {
  constructor() {
    super(401, "invalid_request_error", "Missing or invalid admin token.", { code: "invalid_admin_token" });
  }
}

/** 401 on /metrics when metrics.token is set: the scrape's Bearer token is missing or wrong. */
export class MetricsAuthError extends ApiError {
  constructor() {
    super(401, "invalid_request_error", "Missing or invalid metrics token.", {
      code: "invalid_metrics_token",
      headers: { "www-authenticate": 'Bearer realm="metrics"' },
    });
  }
}

/**
 * 429 when an address has spent its budget of wrong credentials (admin token): every attempt, right or wrong, is
 * refused until the window refills, so guessing learns nothing. retry-after says when, in whole seconds.
 */
export class AuthThrottledError extends ApiError {
  constructor(message: string, retryAfterMs: number) {
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    const minutes = Math.max(1, Math.ceil(seconds / 60));
    super(429, "requests", `${message} Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`, {
      code: "too_many_failed_attempts",
      headers: { "retry-after": String(seconds), "retry-after-ms": String(seconds * 1000) },
    });
  }
}

/** 404 for a model that does not exist or is not granted — one text for both, so there is no existence oracle. */
export class ModelNotFoundError extends ApiError {
  constructor(model: string) {
    super(
      404,
      "invalid_request_error",
      `The model \`${model}\` does not exist or you do not have access to it.`,
      {
        param: "model",
        code: "model_not_found",
      },
    );
  }
}

/** 404 for an unknown route or resource. */
export class NotFoundError extends ApiError {
  constructor(message: string, code: ErrorCode | null = "not_found") {
    super(404, "invalid_request_error", message, { code });
  }
}

/** 409 for a duplicate resource (code conflict) or a change the resource's state refuses (e.g. last_owner). */
export class ConflictError extends ApiError {
  constructor(message: string, code: ErrorCode = "conflict") {
    super(409, "invalid_request_error", message, { code });
  }
}

/**
 * 413: request body larger than the configured limit. The rest of the body is never read, so the connection cannot
 * carry another request: `Connection: close` tells the client so, instead of letting it reuse a socket the server
 * is about to close (its next request would be lost).
 */
export class PayloadTooLargeError extends ApiError {
  constructor(limitBytes: number) {
    super(413, "invalid_request_error", `Request body too large: the limit is ${limitBytes} bytes.`, {
      code: "request_too_large",
      headers: { connection: "close" },
    });
  }
}

/** 405: the route exists but not with this method. */
export class MethodNotAllowedError extends ApiError {
  constructor(method: string, path: string) {
    super(405, "invalid_request_error", `Method ${method} is not allowed on ${path}.`, {
      code: "method_not_allowed",
    });
  }
}

/** The window a 429 ran out of; OpenAI puts it in error.type. */
export type RateLimitKind = Extract<ErrorType, "requests" | "tokens">;

export interface RateLimitErrorOptions {
  /** When the window has room again; written as retry-after (whole seconds, 1..60) and retry-after-ms. */
  retryAfterMs: number;
  /** The x-ratelimit-* headers of the moment of refusal. */
  headers?: Record<string, string>;
  /** False when waiting cannot help (one request larger than the whole window): x-should-retry: false. */
  retryable?: boolean;
}

/** 429: the organization's requests or tokens per minute are spent; nothing was consumed. */
export class RateLimitError extends ApiError {
  constructor(
    readonly kind: RateLimitKind,
    message: string,
    { retryAfterMs, headers = {}, retryable = true }: RateLimitErrorOptions,
  ) {
    const ms = Math.min(60_000, Math.max(1, Math.ceil(retryAfterMs)));
    super(429, kind, message, {
      code: "rate_limit_exceeded",
      headers: {
        ...headers,
        "retry-after": String(Math.ceil(ms / 1000)),
        "retry-after-ms": String(ms),
        ...(retryable ? {} : { "x-should-retry": "false" }),
      },
    });
  }
}

/** 503: the engine's queue is full or the service is draining. The client should retry after a short back-off. */
export class EngineOverloadedError extends ApiError {
  constructor(
    message = "The engine is currently overloaded, please try again later.",
    retryAfterSeconds = 1,
  ) {
    super(503, "server_error", message, {
      code: "engine_overloaded",
      headers: {
        "retry-after": String(retryAfterSeconds),
        "retry-after-ms": String(retryAfterSeconds * 1000),
      },
    });
  }
}

/**
 * 499 (nginx's "client closed request"): the client left before its request was admitted. Nobody reads the body;
 * the status keeps such requests apart from server errors in logs and metrics.
 */
export class ClientClosedRequestError extends ApiError {
  constructor() {
    super(499, "invalid_request_error", "The client closed the request before it was admitted.", {
      code: "client_closed_request",
    });
  }
}

/** 503 while models or the store are still loading. */
export class NotReadyError extends ApiError {
  constructor(message = "The service is starting up, please try again shortly.") {
    super(503, "server_error", message, {
      code: "engine_overloaded",
      headers: { "retry-after": "1" },
    });
  }
}

/** How long a client should wait before retrying while the store is down (outages last seconds, not ms). */
const STORE_RETRY_AFTER_SECONDS = 2;

/**
 * 503 while the store cannot be asked and the request needs it (an API key not verified recently). Nothing was
 * done; the same request succeeds once the store is back.
 */
export class StoreUnavailableApiError extends ApiError {
  constructor(cause?: unknown) {
    super(
      503,
      "server_error",
      "Hearth cannot check your API key right now because its database is unavailable; please retry shortly.",
      {
        code: "store_unavailable",
        headers: {
          "retry-after": String(STORE_RETRY_AFTER_SECONDS),
          "retry-after-ms": String(STORE_RETRY_AFTER_SECONDS * 1000),
        },
        cause,
      },
    );
  }
}

/** 500 with a generic message; details only in the log. */
export class InternalServerError extends ApiError {
  constructor(cause?: unknown) {
    super(500, "server_error", "The server had an error while processing your request. Sorry about that!", {
      code: "server_error",
      cause,
    });
  }
}
