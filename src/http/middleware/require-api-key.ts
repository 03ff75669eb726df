// Hono middleware: Authorization: Bearer <API key> → the caller's Principal, or a 401 invalid_api_key.
import type { MiddlewareHandler } from "hono";
import { maskPresentedKey } from "../../auth/api-key.js";
import type { Tenancy } from "../../tenancy/tenancy.js";
import type { AppEnv } from "../env.js";
import { InvalidApiKeyError } from "../errors/api-error.js";
import { requestHeader } from "../node-request.js";

export const MISSING_API_KEY_MESSAGE =
  "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth " +
  "(i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from your Hearth administrator.";

export function incorrectApiKeyMessage(presented: string): string {
  return (
    `Incorrect API key provided: ${maskPresentedKey(presented)}. ` +
    "You can obtain an API key from your Hearth administrator."
  );
}

/**
 * The Bearer credential of an Authorization header: undefined when there is none (absent, empty, or another
 * scheme such as Basic), otherwise the raw credential, which may still be malformed.
 */
export function bearerCredential(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^\s*Bearer(?:\s+(.*?))?\s*$/i.exec(header);
  const credential = match?.[1];
  return credential === undefined || credential === "" ? undefined : credential;
}

export function requireApiKey(tenancy: Pick<Tenancy, "keys">): MiddlewareHandler<AppEnv> {
  return async function requireApiKey(c, next) {
    const presented = bearerCredential(requestHeader(c, "authorization"));
    if (presented === undefined) throw new InvalidApiKeyError(MISSING_API_KEY_MESSAGE);
    // Unknown, revoked, expired and malformed keys get one answer: the response must not say which keys exist.
    const principal = await tenancy.keys.verify(presented);
    if (principal === null) throw new InvalidApiKeyError(incorrectApiKeyMessage(presented));
    c.set("principal", principal);
    await next();
  };
}
