// Gives every request an id (x-request-id on every response) and logs one line per request.
import { randomBytes } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app/env.js";
import type { Logger } from "./logger.js";

export function newRequestId(): string {
  return `req_${randomBytes(12).toString("hex")}`;
}

/** `clientAddress` (services.clientAddress) puts the client on each line, as the throttles count it. */
export function requestId(
  logger: Logger,
  clientAddress?: (c: Context<AppEnv>) => string,
): MiddlewareHandler<AppEnv> {
  return async function requestId(c, next) {
    const id = newRequestId();
    c.set("requestId", id);
    const started = performance.now();
    await next();
    c.header("x-request-id", id);
    logger.info(
      {
        requestId: id,
        ...(clientAddress === undefined ? {} : { client: clientAddress(c) }),
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
      },
      "request",
    );
  };
}
