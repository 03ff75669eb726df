// Maps domain failures of the engine and tenancy layers to the HTTP error hierarchy, and an ApiError to its HTTP
// response, in one place.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

import { JsonSchemaError } from "../chat/json-schema.js";
import { TemplateError } from "../chat/template.js";
import {
  ContextOverflowError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  TooManyChoicesError,
  UnknownModelError,
} from "../engine/errors.js";
import {
  type ApiError,
  ClientClosedRequestError,
  ContextLengthError,
  EngineOverloadedError,
  InvalidRequestError,
  ModelNotFoundError,
  toApiError,
} from "../errors/api-error.js";

export function mapDomainError(err: unknown): ApiError {
  if (err instanceof ContextOverflowError) return new ContextLengthError(err.message);
  if (err instanceof QueueFullError) return new EngineOverloadedError();
  // Same answer as a full queue (the client backs off and retries; nothing was generated), saying it waited.
  if (err instanceof QueueTimeoutError) return new EngineOverloadedError(err.message);
  if (err instanceof RequestAbortedError) return new ClientClosedRequestError();
  if (err instanceof UnknownModelError) return new ModelNotFoundError(err.model);
  // A template that rejects the conversation (e.g. roles out of order) is the client's input, not our fault.
  if (err instanceof TemplateError && err.kind !== "syntax") {
    return new InvalidRequestError(
      `The model's chat template rejected the messages: ${err.message}`,
      "messages",
    );
  }
  if (err instanceof TooManyChoicesError) return new InvalidRequestError(err.message, "n");
  // The API checks schemas first; this only keeps a schema the engine rejects a 400 rather than a 500.
  if (err instanceof JsonSchemaError) return new InvalidRequestError(err.message, "response_format");
  return toApiError(err);
}

/** The response of an error: its status, its retry and rate-limit headers, and the OpenAI error body. */
export function apiErrorResponse(c: Context, apiError: ApiError): Response {
  for (const [name, value] of Object.entries(apiError.headers)) c.header(name, value);
  return c.json(apiError.toBody(), apiError.status as ContentfulStatusCode);
}
