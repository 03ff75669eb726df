// Gives every request an id (x-request-id on every response) and logs one line per request.
import { randomBytes } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app/env.js";
import type { Logger } from "./logger.js";

export function newRequestId(): string {
  return `req_${randomBytes(12).toString("hex")}`;
}

export function requestId(logger: Logger): MiddlewareHandler<AppEnv> {
  return async function requestId(c, next) {
    const id = newRequestId();
    c.set("requestId", id);
    const started = performance.now();
    await next();
    c.header("x-request-id", id);
    logger.info(
      {
        requestId: id,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
      },
      "request",
    );
  };
}
