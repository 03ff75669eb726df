// The `X-Session-Id` request header: an explicit affinity key for upstream models (docs/fleet.md), read at the edge.
import type { Context } from "hono";
import type { AppEnv } from "./env.js";
import { InvalidRequestError } from "./errors/api-error.js";
import { requestHeader } from "./node-request.js";

export const SESSION_ID_HEADER = "x-session-id";

/**
 * Longest session id accepted. Routing only hashes it (never stores or logs it), so the bound is not for memory: a
 * longer value is a client sending something else than an id (a prompt, a token), and is told so rather than cut,
 * which would silently merge sessions that share their first characters.
 */
export const MAX_SESSION_ID_CHARS = 256;

/** The request's session id: undefined when absent or empty; a 400 when longer than MAX_SESSION_ID_CHARS. */
export function sessionIdOf(c: Context<AppEnv>): string | undefined {
  const value = requestHeader(c, SESSION_ID_HEADER)?.trim();
  if (value === undefined || value === "") return undefined;
  if (value.length > MAX_SESSION_ID_CHARS) {
    throw new InvalidRequestError(
      `The X-Session-Id header is ${value.length} characters long; at most ${MAX_SESSION_ID_CHARS} are accepted.`,
      "X-Session-Id",
    );
  }
  return value;
}
