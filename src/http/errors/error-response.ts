// An ApiError as its HTTP response; which error a failure becomes is src/http/errors/domain-errors.ts's to say.
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ApiError } from "./api-error.js";

/** The response of an error: its status, its retry and rate-limit headers, and the OpenAI error body. */
export function apiErrorResponse(c: Context, apiError: ApiError): Response {
  for (const [name, value] of Object.entries(apiError.headers)) c.header(name, value);
  return c.json(apiError.toBody(), apiError.status as ContentfulStatusCode);
}
