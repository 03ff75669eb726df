// Maps domain failures of the engine and tenancy layers to the HTTP error hierarchy, in one place.
import {
  type ApiError,
  ContextLengthError,
  EngineOverloadedError,
  InvalidRequestError,
  ModelNotFoundError,
  toApiError,
} from "../errors/api-error.js";
import { ContextOverflowError, QueueFullError, TooManyChoicesError, UnknownModelError } from "../engine/errors.js";

export function mapDomainError(err: unknown): ApiError {
  if (err instanceof ContextOverflowError) return new ContextLengthError(err.message);
  if (err instanceof QueueFullError) return new EngineOverloadedError();
  if (err instanceof UnknownModelError) return new ModelNotFoundError(err.model);
  if (err instanceof TooManyChoicesError) return new InvalidRequestError(err.message, "n");
  return toApiError(err);
}
