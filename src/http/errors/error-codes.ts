// The registry of every error code and error type Hearth puts in {"error":{"type","code"}}, with their HTTP statuses.

/** Every `error.code` Hearth sends, with the one HTTP status it is sent with. */
export const ERROR_CODES = Object.freeze({
  /** A malformed body or an invalid parameter; `param` names it. */
  invalid_request_error: 400,
  /** The prompt plus max_tokens do not fit in the model's context (`param` messages). */
  context_length_exceeded: 400,
  /** A response_format or tool schema over the schema budget (config server.schemaBudget); the message names the limit. */
  schema_too_complex: 400,
  /** Admin API: a model id that is not in the server's configured models. */
  unknown_model: 400,
  invalid_api_key: 401,
  invalid_admin_token: 401,
  /** /metrics with metrics.token set: the Bearer token is missing or wrong. */
  invalid_metrics_token: 401,
  /** A model that does not exist or is not granted: one code for both, so there is no existence oracle. */
  model_not_found: 404,
  not_found: 404,
  /** No route has this path. */
  unknown_url: 404,
  org_not_found: 404,
  key_not_found: 404,
  grant_not_found: 404,
  member_not_found: 404,
  method_not_allowed: 405,
  /** A duplicate organization, user or membership. */
  conflict: 409,
  /** The change would leave an organization without an owner. */
  last_owner: 409,
  request_too_large: 413,
  rate_limit_exceeded: 429,
  /** Too many wrong credentials (admin tokens) from one address: refused until the window refills. */
  too_many_failed_attempts: 429,
  /** nginx's 499: the client left before its request was admitted; nobody reads the body. */
  client_closed_request: 499,
  server_error: 500,
  /** The engine's queue is full, the service is draining or still loading: retry after a short back-off. */
  engine_overloaded: 503,
  /** The store (PostgreSQL) cannot be reached, so the API key could not be checked: retry after the back-off. */
  store_unavailable: 503,
} as const);

export type ErrorCode = keyof typeof ERROR_CODES;

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
