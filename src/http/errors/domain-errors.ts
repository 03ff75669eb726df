// The one map from expected domain refusals (engine, chat, limits, tenancy, store) to the HTTP error hierarchy: /v1,
// /admin/v1 and the dashboard's pages all answer a refusal with the status, message, code and headers this module
// gives it. Whose doing a refusal was is the refusal's own to say (src/refusal.ts); the map agrees (its test checks).

import { ModelEntryError } from "../../catalogue/catalogue.js";
import { AmbiguousRecursionError } from "../../chat/schema/ambiguity.js";
import { SchemaBudgetError } from "../../chat/schema/budget.js";
import { JsonSchemaError } from "../../chat/schema/json-schema.js";
import { TemplateError } from "../../chat/template/render.js";
import { RenderQueueFullError } from "../../chat/template/thread.js";
import {
  ContextOverflowError,
  EngineNotReadyError,
  ModelCatalogueError,
  ModelMemoryError,
  PromptTooLongError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  SamplingFieldUnsupportedError,
  ToolsUnsupportedError,
  TooManyChoicesError,
  UnknownModelError,
  UnknownTokenError,
} from "../../engine/errors.js";
import { EndpointEjectedError } from "../../engine/upstream/endpoint-pool.js";
import { EngineDisposedError, FirstTokenTimeoutError } from "../../engine/upstream/upstream-call.js";
import { UpstreamError, UpstreamProtocolError } from "../../engine/upstream/upstream-error.js";
import { RateLimitRefusal } from "../../limits/rate-limit-refusal.js";
import { ResponseChainTooLargeError } from "../../responses/types.js";
import { StoreUnavailableError } from "../../store/store-status.js";
import {
  AccountExistsError,
  AlreadyMemberError,
  DuplicateOrgError,
  DuplicateUserError,
  GrantNotFoundError,
  InvitationNotFoundError,
  KeyNotFoundError,
  LastOwnerError,
  MemberNotFoundError,
  OrgNotFoundError,
  TenancyError,
  TenancyValidationError,
  UnknownModelIdError,
} from "../../tenancy/errors.js";
import { formatDuration, rateLimitHeaders } from "../rate-limit-headers.js";
import {
  ApiError,
  ClientClosedRequestError,
  ConflictError,
  ContextLengthError,
  EngineOverloadedError,
  InternalServerError,
  InvalidRequestError,
  ModelNotFoundError,
  NotFoundError,
  NotReadyError,
  RateLimitError,
  StoreUnavailableApiError,
} from "./api-error.js";

/** What only the caller knows about a failure. */
export interface DomainErrorHints {
  /**
   * The request field that carried the failing value, where the route decides it: `models` for a new org's
   * unknown model id (default `model`), a tool's `parameters` for a schema (default `response_format`).
   */
  param?: string;
}

/**
 * The HTTP error of an expected domain failure; undefined for anything else (a bug, or already an ApiError).
 * Callers that catch a domain call rethrow `domainApiError(err) ?? err`, so a bug keeps its stack and its log line.
 */
export function domainApiError(err: unknown, hints: DomainErrorHints = {}): ApiError | undefined {
  // The organization's requests or tokens per minute.
  if (err instanceof RateLimitRefusal) return rateLimitError(err);
  // The engine.
  if (err instanceof ContextOverflowError || err instanceof PromptTooLongError) {
    return new ContextLengthError(err.message);
  }
  if (err instanceof QueueFullError) return new EngineOverloadedError();
  if (err instanceof RenderQueueFullError) return new EngineOverloadedError(err.message);
  // Same answer as a full queue (the client backs off and retries; nothing was generated), saying it waited.
  if (err instanceof QueueTimeoutError) return new EngineOverloadedError(err.message);
  if (err instanceof RequestAbortedError) return new ClientClosedRequestError();
  if (err instanceof UnknownModelError) return new ModelNotFoundError(err.model);
  if (err instanceof EngineNotReadyError) {
    // Models load and unload one by one at run time: the answer names the model and what it is doing.
    return err.detail === "loading" || err.detail === "downloading"
      ? new NotReadyError(`The model \`${err.model}\` is ${err.detail}, please try again shortly.`)
      : new NotReadyError(
          `The model \`${err.model}\` is unavailable right now (${err.detail}), please try again shortly.`,
        );
  }
  if (err instanceof ModelMemoryError) return new NotReadyError(err.message);
  // The model catalogue (admin API).
  if (err instanceof ModelCatalogueError) {
    return err.reason === "exists"
      ? new ConflictError(err.message)
      : new NotFoundError(err.message, "model_not_found");
  }
  if (err instanceof ModelEntryError) return new InvalidRequestError(err.message, err.param ?? null);
  if (err instanceof TooManyChoicesError) return new InvalidRequestError(err.message, "n");
  if (err instanceof ToolsUnsupportedError) return new InvalidRequestError(err.message, "tools");
  if (err instanceof SamplingFieldUnsupportedError) return new InvalidRequestError(err.message, err.field);
  if (err instanceof UnknownTokenError) return new InvalidRequestError(err.message, "logit_bias");
  if (err instanceof ResponseChainTooLargeError)
    return new InvalidRequestError(err.message, "previous_response_id");
  // Upstream engines: a request every endpoint would refuse stays a 400 with the upstream's (cleaned) message;
  // an endpoint that failed is retried before the 200, so what reaches here failed mid-stream or at shutdown.
  if (err instanceof UpstreamError && err.clientError)
    return new InvalidRequestError(err.message, err.param ?? null);
  if (
    err instanceof UpstreamError ||
    err instanceof UpstreamProtocolError ||
    err instanceof FirstTokenTimeoutError ||
    err instanceof EndpointEjectedError ||
    err instanceof EngineDisposedError
  ) {
    return new EngineOverloadedError("The upstream engine failed during the request, please retry it.");
  }
  // Chat: a template that rejects the conversation (e.g. roles out of order) is the client's input, not our fault.
  if (err instanceof TemplateError && err.kind !== "syntax") {
    return new InvalidRequestError(
      `The model's chat template rejected the messages: ${err.message}`,
      "messages",
    );
  }
  // A schema over the budget: the limit is named in the message and the code says it is not malformed, only too big.
  if (err instanceof SchemaBudgetError || err instanceof AmbiguousRecursionError) {
    const param = hints.param ?? "response_format";
    return new InvalidRequestError(
      `Invalid schema for '${param}': ${err.message} (${err.path})`,
      param,
      "schema_too_complex",
    );
  }
  if (err instanceof JsonSchemaError) {
    const param = hints.param ?? "response_format";
    return new InvalidRequestError(`Invalid schema for '${param}': ${err.message} (${err.path})`, param);
  }
  // The store: down or hung, and the request needed it (a key or grant not cached recently).
  if (err instanceof StoreUnavailableError) return new StoreUnavailableApiError(err);
  // Tenancy.
  if (err instanceof OrgNotFoundError) return new NotFoundError(err.message, "org_not_found");
  if (err instanceof KeyNotFoundError) return new NotFoundError(err.message, "key_not_found");
  if (err instanceof GrantNotFoundError) return new NotFoundError(err.message, "grant_not_found");
  if (err instanceof MemberNotFoundError) return new NotFoundError(err.message, "member_not_found");
  if (err instanceof InvitationNotFoundError) return new NotFoundError(err.message);
  if (
    err instanceof DuplicateOrgError ||
    err instanceof DuplicateUserError ||
    err instanceof AlreadyMemberError ||
    err instanceof AccountExistsError
  ) {
    return new ConflictError(err.message);
  }
  if (err instanceof LastOwnerError) return new ConflictError(err.message, "last_owner");
  if (err instanceof UnknownModelIdError) {
    // The dashboard's grant form sends an empty id when no model was picked; the API's schemas refuse one earlier.
    const message = err.modelId === "" ? "Choose a model first." : err.message;
    return new InvalidRequestError(message, hints.param ?? "model", "unknown_model");
  }
  if (err instanceof TenancyValidationError) return new InvalidRequestError(err.message, err.field);
  // A tenancy failure is expected by definition (its base class says so): the client's to fix, never a 500.
  if (err instanceof TenancyError) return new InvalidRequestError(err.message);
  return undefined;
}

/**
 * The 429 of a rate-limit refusal: the limiter's words with OpenAI's retry hint, retry-after, the x-ratelimit-*
 * headers of the moment of refusal, and x-should-retry: false when waiting cannot help.
 */
function rateLimitError(refusal: RateLimitRefusal): RateLimitError {
  const message = refusal.retryable
    ? `${refusal.message} Please try again in ${formatDuration(refusal.retryAfterMs)}.`
    : refusal.message;
  return new RateLimitError(refusal.kind, message, {
    retryAfterMs: refusal.retryAfterMs,
    headers: rateLimitHeaders(refusal.snapshot),
    retryable: refusal.retryable,
  });
}

/** Any thrown value → ApiError: an ApiError as it is, a domain failure by the map, anything else a generic 500. */
export function mapDomainError(err: unknown, hints: DomainErrorHints = {}): ApiError {
  if (err instanceof ApiError) return err;
  return domainApiError(err, hints) ?? new InternalServerError(err);
}
