// The registry of every error code and error type Hearth puts in {"error":{"type","code"}}: the one place that
// says which HTTP status and type each code is sent with (ApiError takes both from here).

/**
 * Every `error.type`: OpenAI's two classes, and for a 429 the window that ran out (OpenAI puts `requests` or
 * `tokens` there).
 */
export const ERROR_TYPES = Object.freeze([
  "invalid_request_error",
  "server_error",
  "requests",
  "tokens",
] as const);

export type ErrorType = (typeof ERROR_TYPES)[number];

/** What a code is sent with. */
export interface ErrorCodeEntry {
  readonly status: number;
  /** For a 429 `rate_limit_exceeded`, the window that ran out replaces it (RateLimitError): requests or tokens. */
  readonly type: ErrorType;
}

/** Every `error.code` Hearth sends, with the one HTTP status and the `error.type` it is sent with. */
export const ERROR_CODES = Object.freeze({
  /** A malformed body or an invalid parameter; `param` names it. */
  invalid_request_error: { status: 400, type: "invalid_request_error" },
  /** The prompt plus max_tokens do not fit in the model's context (`param` messages). */
  context_length_exceeded: { status: 400, type: "invalid_request_error" },
  /** A response_format or tool schema over the schema budget (config server.schemaBudget); the message names the limit. */
  schema_too_complex: { status: 400, type: "invalid_request_error" },
  /** Admin API: a model id that is not in the server's configured models. */
  unknown_model: { status: 400, type: "invalid_request_error" },
  invalid_api_key: { status: 401, type: "invalid_request_error" },
  invalid_admin_token: { status: 401, type: "invalid_request_error" },
  /** /metrics with metrics.token set: the Bearer token is missing or wrong. */
  invalid_metrics_token: { status: 401, type: "invalid_request_error" },
  /** A model that does not exist or is not granted: one code for both, so there is no existence oracle. */
  model_not_found: { status: 404, type: "invalid_request_error" },
  not_found: { status: 404, type: "invalid_request_error" },
  /** No route has this path. */
  unknown_url: { status: 404, type: "invalid_request_error" },
  org_not_found: { status: 404, type: "invalid_request_error" },
  key_not_found: { status: 404, type: "invalid_request_error" },
  grant_not_found: { status: 404, type: "invalid_request_error" },
  member_not_found: { status: 404, type: "invalid_request_error" },
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  /** A duplicate organization, user or membership. */
  conflict: { status: 409, type: "invalid_request_error" },
  /** The change would leave an organization without an owner. */
  last_owner: { status: 409, type: "invalid_request_error" },
  request_too_large: { status: 413, type: "invalid_request_error" },
  rate_limit_exceeded: { status: 429, type: "requests" },
  /** Too many wrong credentials (admin tokens) from one address: refused until the window refills. */
  too_many_failed_attempts: { status: 429, type: "requests" },
  /** nginx's 499: the client left before its request was admitted; nobody reads the body. */
  client_closed_request: { status: 499, type: "invalid_request_error" },
  server_error: { status: 500, type: "server_error" },
  /** The engine's queue is full, the service is draining or still loading: retry after a short back-off. */
  engine_overloaded: { status: 503, type: "server_error" },
  /** The store (PostgreSQL) cannot be reached, so the API key could not be checked: retry after the back-off. */
  store_unavailable: { status: 503, type: "server_error" },
} as const satisfies Record<string, ErrorCodeEntry>);

export type ErrorCode = keyof typeof ERROR_CODES;
