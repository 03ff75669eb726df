// Gives every request an id (x-request-id on every response) and logs one line per request.

import type { Context, MiddlewareHandler } from "hono";
import type { Logger } from "../../observability/logger.js";
import { idBytes } from "../../store/ids.js";
import type { AppEnv } from "../env.js";

export function newRequestId(): string {
  return `req_${idBytes(12).toString("hex")}`;
}

// A path segment this long and opaque is a capability (an invitation link's token), not a name or an id (ids such
// as key_… are shorter): the log line keeps the route and drops the secret.
const SECRET_SEGMENT = /^[0-9A-Za-z_-]{32,}$/;

/** The path as logged: every token-like segment replaced, so no secret link reaches the logs. */
export function loggedPath(path: string): string {
  return path
    .split("/")
    .map((segment) => (SECRET_SEGMENT.test(segment) ? "[redacted]" : segment))
    .join("/");
}

/** `clientAddress` (services.clientAddress) puts the client on each line, as the throttles count it. */
export function requestId(
  logger: Logger,
  clientAddress?: (c: Context<AppEnv>) => string,
): MiddlewareHandler<AppEnv> {
  return async function requestId(c, next) {
    const id = newRequestId();
    c.set("requestId", id);
    // Set before the handler, so the response it builds carries it. Setting a header on a response already built
    // makes Hono copy it (and @hono/node-server then build a full WHATWG Response): only a handler's own
    // Response without it (none on the hot path) pays that.
    c.header("x-request-id", id);
    const started = performance.now();
    await next();
    if (!c.res.headers.has("x-request-id")) c.header("x-request-id", id);
    const { status } = c.res;
    const ms = Math.round(performance.now() - started);
    // Written once the response is on its way: the log line's work is not part of any request's latency.
    setImmediate(() =>
      logger.info(
        {
          requestId: id,
          ...(clientAddress === undefined ? {} : { client: clientAddress(c) }),
          method: c.req.method,
          path: loggedPath(c.req.path),
          status,
          ms,
        },
        "request",
      ),
    );
  };
}
