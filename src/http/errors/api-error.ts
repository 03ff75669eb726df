// The HTTP-edge error hierarchy and its one serialisation to OpenAI's {"error":{...}} body.
import { type Fault, Refusal } from "../../refusal.js";
import { ERROR_CODES, type ErrorCode, type ErrorType } from "./error-codes.js";

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: ErrorCode | null };
}

export interface ApiErrorOptions {
  param?: string | null;
  headers?: Record<string, string>;
  cause?: unknown;
}

/** The codes the registry sends with `status`: a class of one status takes only those. */
export type CodeWithStatus<S extends number> = {
  [C in ErrorCode]: (typeof ERROR_CODES)[C]["status"] extends S ? C : never;
}[ErrorCode];

/**
 * An error that knows its HTTP status and OpenAI body. Middleware and handlers throw these; http/app.ts renders them.
 * The status and the type are the code's, from the registry (error-codes.ts): a status is stated once. It is a
 * refusal too (a 4xx the client's, a 5xx the server's), so a service handed one by a route's reader can tell.
 */
export class ApiError extends Refusal {
  readonly status: number;
  readonly type: ErrorType;
  readonly fault: Fault;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    const { status, type } = ERROR_CODES[code];
    this.status = status;
    this.type = type;
    this.fault = status < 500 ? "client" : "server";
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400: the request was malformed or a parameter was invalid. */
export class InvalidRequestError extends ApiError {
  declare readonly code: CodeWithStatus<400>;

  constructor(
    message: string,
    param: string | null = null,
    code: CodeWithStatus<400> = "invalid_request_error",
  ) {
    super(code, message, { param });
  }
}

/** 400 with code context_length_exceeded (param messages), as OpenAI answers. */
export class ContextLengthError extends ApiError {
  constructor(message: string) {
    super("context_length_exceeded", message, { param: "messages" });
  }
}

/** 401: missing or invalid API key. The spec shows type invalid_request_error for this case. */
export class InvalidApiKeyError extends ApiError {
  constructor(message = "Incorrect API key provided. You can find your API keys in the Hearth dashboard.") {
    super("invalid_api_key", message);
  }
}

/** 401 on the admin API: the admin token is missing or wrong. */
export class AdminAuthError extends ApiError {
  constructor() {
    super("invalid_admin_token", "Missing or invalid admin token.");
  }
}

/** 401 on /metrics when metrics.token is set: the scrape's Bearer token is missing or wrong. */
export class MetricsAuthError extends ApiError {
  constructor() {
    super("invalid_metrics_token", "Missing or invalid metrics token.", {
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
    super(
      "too_many_failed_attempts",
      `${message} Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`,
      {
        headers: { "retry-after": String(seconds), "retry-after-ms": String(seconds * 1000) },
      },
    );
  }
}

/** 404 for a model that does not exist or is not granted — one text for both, so there is no existence oracle. */
export class ModelNotFoundError extends ApiError {
  constructor(model: string) {
    super("model_not_found", `The model \`${model}\` does not exist or you do not have access to it.`, {
      param: "model",
    });
  }
}

/** 404 for an unknown route or resource. */
export class NotFoundError extends ApiError {
  constructor(message: string, code: CodeWithStatus<404> = "not_found") {
    super(code, message);
  }
}

/** 409 for a duplicate resource (code conflict) or a change the resource's state refuses (e.g. last_owner). */
export class ConflictError extends ApiError {
  constructor(message: string, code: CodeWithStatus<409> = "conflict") {
    super(code, message);
  }
}

/**
 * 413: request body larger than the configured limit. The rest of the body is never read, so the connection cannot
 * carry another request: `Connection: close` tells the client so, instead of letting it reuse a socket the server
 * is about to close (its next request would be lost).
 */
export class PayloadTooLargeError extends ApiError {
  constructor(limitBytes: number) {
    super("request_too_large", `Request body too large: the limit is ${limitBytes} bytes.`, {
      headers: { connection: "close" },
    });
  }
}

/** 405: the route exists but not with this method. */
export class MethodNotAllowedError extends ApiError {
  constructor(method: string, path: string) {
    super("method_not_allowed", `Method ${method} is not allowed on ${path}.`);
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
  /** The window that ran out, in place of the code's type (OpenAI's `requests` or `tokens`). */
  declare readonly type: RateLimitKind;

  constructor(
    readonly kind: RateLimitKind,
    message: string,
    { retryAfterMs, headers = {}, retryable = true }: RateLimitErrorOptions,
  ) {
    const ms = Math.min(60_000, Math.max(1, Math.ceil(retryAfterMs)));
    super("rate_limit_exceeded", message, {
      headers: {
        ...headers,
        "retry-after": String(Math.ceil(ms / 1000)),
        "retry-after-ms": String(ms),
        ...(retryable ? {} : { "x-should-retry": "false" }),
      },
    });
    this.type = kind;
  }
}

/** 503: the engine's queue is full or the service is draining. The client should retry after a short back-off. */
export class EngineOverloadedError extends ApiError {
  constructor(
    message = "The engine is currently overloaded, please try again later.",
    retryAfterSeconds = 1,
  ) {
    super("engine_overloaded", message, {
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
    super("client_closed_request", "The client closed the request before it was admitted.");
  }
}

/** 503 while models or the store are still loading. */
export class NotReadyError extends ApiError {
  constructor(message = "The service is starting up, please try again shortly.") {
    super("engine_overloaded", message, {
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
      "store_unavailable",
      "Hearth cannot check your API key right now because its database is unavailable; please retry shortly.",
      {
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
    super("server_error", "The server had an error while processing your request. Sorry about that!", {
      cause,
    });
  }
}
