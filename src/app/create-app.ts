// Builds the Hono app: middleware order, the /v1 and admin sub-apps, and the one error renderer.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { createAdminApp } from "../admin/admin-app.js";
import { chatCompletions } from "../api/chat-completions.js";
import { listModels, retrieveModel } from "../api/models.js";
import { requireApiKey } from "../auth/require-api-key.js";
import { createDashboardApp } from "../dashboard/app.js";
import {
  ApiError,
  EngineOverloadedError,
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
} from "../errors/api-error.js";
import { rateLimitHeaders } from "../limits/headers.js";
import { requestId } from "../observability/request-id.js";
import type { AppEnv } from "./env.js";
import { apiErrorResponse, mapDomainError } from "./error-mapping.js";
import type { Services } from "./services.js";

export function createApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const { logger } = services;
  const maxBodyBytes = services.config.server.maxBodyBytes;

  app.use("*", requestId(logger));

  app.get("/health", (c) => {
    if (services.draining()) return c.json({ status: "draining" }, 503);
    const ready = services.engine.isReady() && services.storeReady();
    return c.json({ status: ready ? "ok" : "starting" }, ready ? 200 : 503);
  });

  // Prometheus scrape endpoint; labels are bounded (models, statuses), never keys or organizations.
  app.get("/metrics", async (c) => {
    const { contentType, body } = await services.metrics.render();
    return c.body(body, 200, { "content-type": contentType });
  });

  const v1 = new Hono<AppEnv>();
  v1.use(
    "*",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new PayloadTooLargeError(maxBodyBytes);
      },
    }),
  );
  v1.use("/chat/completions", async (c, next) => {
    await next();
    const model = c.get("model");
    services.metrics.requestFinished(model ?? "unknown", c.res.status);
  });
  v1.use("*", async (_c, next) => {
    if (services.draining()) {
      throw new EngineOverloadedError("The server is shutting down, please retry the request.");
    }
    await next();
  });
  v1.use("*", requireApiKey(services.tenancy));
  // Every authenticated /v1 response carries the x-ratelimit-* headers; chat completions set them at admission.
  v1.use("*", async (c, next) => {
    await next();
    if (c.res.headers.has("x-ratelimit-limit-requests") || c.res.headers.has("x-ratelimit-limit-tokens"))
      return;
    try {
      const snapshot = await services.limiter.snapshot(c.get("principal"));
      for (const [name, value] of Object.entries(rateLimitHeaders(snapshot))) c.header(name, value);
    } catch (err) {
      // Headers are advisory: a limiter that cannot answer must not turn a served response into an error.
      logger.warn({ err, requestId: c.get("requestId") }, "reading the rate-limit state failed");
    }
  });
  v1.post("/chat/completions", (c) => chatCompletions(c, services));
  v1.get("/models", (c) => listModels(c, services));
  v1.get("/models/:id{.+}", (c) => retrieveModel(c, services));
  v1.all("/chat/completions", (c) => {
    throw new MethodNotAllowedError(c.req.method, c.req.path);
  });
  app.route("/v1", v1);
  app.route(
    "/admin/v1",
    createAdminApp(services.tenancy, services.adminToken, { usage: services.usageQueries }),
  );
  app.route(
    "/dashboard",
    createDashboardApp({
      tenancy: services.tenancy,
      logger,
      usage: services.usageQueries,
      limiter: services.limiter,
      models: () => services.engine.listModels(),
      adminToken: services.adminToken,
      redis: services.redis,
    }),
  );

  app.notFound((c) => {
    return apiErrorResponse(
      c,
      new NotFoundError(`Unknown request URL: ${c.req.method} ${c.req.path}.`, "unknown_url"),
    );
  });

  app.onError((err, c) => {
    const apiError = mapDomainError(err);
    if (apiError.code === "rate_limit_exceeded" || apiError.code === "engine_overloaded") {
      services.metrics.rejected(apiError.code);
    }
    if (apiError.status >= 500 && !(err instanceof ApiError)) {
      logger.error({ err, requestId: c.get("requestId") }, "unhandled error");
    }
    c.header("x-request-id", c.get("requestId"));
    return apiErrorResponse(c, apiError);
  });

  return app;
}
