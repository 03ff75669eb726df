// Builds the Hono app: middleware order, the /v1 and admin sub-apps, and the one error renderer.
import { Hono, type MiddlewareHandler } from "hono";
import type { Services } from "../app/services.js";
import { adminTokenMatches } from "../auth/admin-token.js";
import { schemaBudget } from "../chat/schema/budget.js";
import { RESPONSES_CONFIG_DEFAULTS } from "../config/responses-settings.js";
import type { ModelHealth } from "../engine/types.js";
import { faultCause } from "../observability/fault-cause.js";
import { createAdminApp } from "./admin/app.js";
import { createDashboardApp, type DashboardOptions } from "./dashboard/app.js";
import { createOperatorThrottle, OPERATOR_THROTTLE_RULES } from "./dashboard/operator/operator-session.js";
import type { AppEnv } from "./env.js";
import {
  ApiError,
  EngineOverloadedError,
  InternalServerError,
  MethodNotAllowedError,
  MetricsAuthError,
  NotFoundError,
} from "./errors/api-error.js";
import { mapDomainError } from "./errors/domain-errors.js";
import { apiErrorResponse } from "./errors/error-response.js";
import { requestId } from "./middleware/request-id.js";
import { bearerCredential, requireApiKey } from "./middleware/require-api-key.js";
import { declaredBodyLimit } from "./node-request.js";
import { rateLimitHeaders } from "./rate-limit-headers.js";
import { tokenize } from "./routes/tokenize.js";
import { chatCompletions } from "./routes/v1-chat-completions.js";
import { listModels, retrieveModel } from "./routes/v1-models.js";
import { createResponse } from "./routes/v1-responses.js";
import { deleteResponse, listInputItems, retrieveResponse } from "./routes/v1-responses-by-id.js";

/** Settings outside the config file: tests shorten the dashboard's sessions and sign-in throttles. */
export interface AppOptions {
  /** `operatorThrottle` counts wrong admin tokens at the admin API too: one budget per address for both doors. */
  dashboard?: Pick<DashboardOptions, "sessionIdleMs" | "sessionLifetimeMs" | "throttle" | "operatorThrottle">;
}

export function createApp(services: Services, options: AppOptions = {}): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const { logger } = services;
  const maxBodyBytes = services.config.server.maxBodyBytes;

  app.use("*", requestId(logger, services.clientAddress));
  const adminThrottle =
    options.dashboard?.operatorThrottle ?? createOperatorThrottle(OPERATOR_THROTTLE_RULES, services.redis);

  // 200 once the store answers and at least one model can serve; the body names the store's and each model's state
  // (embedded: lifecycle state, download and load progress, memory estimate; upstream: each endpoint), so an
  // operator sees what is down. Endpoint URLs carry no credentials. The store ping is cached and bounded, so health
  // checks can neither hammer nor hang on it.
  app.get("/health", async (c) => {
    if (services.draining()) return c.json({ status: "draining" }, 503);
    const models = services.engine.health().map(modelHealthWire);
    const store = await services.storeReady();
    const ready = store && models.some((m) => m.status === "ok");
    // Unloaded is a resting state (keepAlive, an operator's unload): the model loads on demand.
    const whole = models.every((m) => m.status === "ok" || m.status === "unloaded");
    const loading = models.some((m) => m.status === "loading" || m.status === "downloading");
    const status = ready ? (whole ? "ok" : "degraded") : loading ? "starting" : "degraded";
    // The embedded engine's backend (gpu false: the CPU) and the GPU's memory, once it has started.
    const accelerator = await services.engine.accelerator?.();
    const engine = accelerator === undefined ? {} : { engine: accelerator };
    return c.json({ status, store: store ? "ok" : "unavailable", ...engine, models }, ready ? 200 : 503);
  });

  // Prometheus scrape endpoint; labels are bounded (models, statuses), never keys or organizations.
  // With metrics.token set, only a scrape presenting it as a Bearer token reads them.
  const metricsToken = services.config.metricsToken;
  app.get("/metrics", async (c) => {
    if (metricsToken !== undefined) {
      const presented = bearerCredential(c.req.header("authorization"));
      // Compared in constant time, like the admin token.
      if (presented === undefined || !adminTokenMatches(metricsToken, presented))
        throw new MetricsAuthError();
    }
    const { contentType, body } = await services.metrics.render();
    return c.body(body, 200, { "content-type": contentType });
  });

  const v1 = new Hono<AppEnv>();
  // A declared length over the limit is refused before authentication; the chat route caps what it reads.
  v1.use("*", declaredBodyLimit(maxBodyBytes));
  const countRequest: MiddlewareHandler<AppEnv> = async (c, next) => {
    await next();
    // The label is a configured model id or "unknown": never a string a client made up.
    const model = c.get("model");
    const known = model !== undefined && services.engine.listModels().some((m) => m.id === model);
    services.metrics.requestFinished(known ? model : "unknown", c.res.status);
  };
  v1.use("/chat/completions", countRequest);
  v1.use("/responses", countRequest);
  const refuseWhileDraining: MiddlewareHandler<AppEnv> = async (_c, next) => {
    if (services.draining()) {
      throw new EngineOverloadedError("The server is shutting down, please retry the request.");
    }
    await next();
  };
  v1.use("*", refuseWhileDraining);
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
      logger.warn(
        { ...faultCause(err), requestId: c.get("requestId") },
        "reading the rate-limit state failed",
      );
    }
  });
  const chat = {
    completions: services.completions,
    logger,
    metrics: services.metrics,
    limits: {
      maxN: services.config.server.maxN,
      maxBodyBytes,
      keepAliveMs: services.config.server.keepAliveMs,
      schemaBudget: schemaBudget(services.config.server.schemaBudget),
      sseDrainTimeoutMs: services.config.server.sseDrainTimeoutMs,
      requestLimits: services.config.server.requestLimits,
    },
  };
  v1.post("/chat/completions", (c) => chatCompletions(c, chat));
  // The Responses API: the same service, limits and admission as chat completions (src/http/routes/v1-responses.ts).
  const responsesConfig = services.config.responses ?? RESPONSES_CONFIG_DEFAULTS;
  const responses = {
    ...chat,
    limits: { ...chat.limits, responses: responsesConfig },
    models: () => services.engine.listModels(),
    store: services.responses,
  };
  v1.post("/responses", (c) => createResponse(c, responses));
  // vLLM's route, at the root: what a Hearth gateway in front of this server pre-charges TPM with.
  app.use("/tokenize", declaredBodyLimit(maxBodyBytes), refuseWhileDraining, requireApiKey(services.tenancy));
  app.post("/tokenize", (c) =>
    tokenize(c, {
      completions: services.completions,
      models: () => services.engine.listModels(),
      limits: { ...chat.limits, maxBodyBytes },
    }),
  );
  v1.get("/models", (c) => listModels(c, services.modelAccess));
  v1.get("/models/:id{.+}", (c) => retrieveModel(c, services.modelAccess));
  // Stored responses (the Responses API's `store`), the key's organization's only.
  const stored = { responses: services.responses };
  v1.get("/responses/:id", (c) => retrieveResponse(c, stored));
  v1.delete("/responses/:id", (c) => deleteResponse(c, stored));
  v1.get("/responses/:id/input_items", (c) => listInputItems(c, stored));
  v1.on(["POST", "PUT", "PATCH"], ["/responses/:id", "/responses/:id/input_items"], (c) => {
    throw new MethodNotAllowedError(c.req.method, c.req.path);
  });
  v1.delete("/responses/:id/input_items", (c) => {
    throw new MethodNotAllowedError(c.req.method, c.req.path);
  });
  v1.all("/chat/completions", (c) => {
    throw new MethodNotAllowedError(c.req.method, c.req.path);
  });
  v1.all("/responses", (c) => {
    throw new MethodNotAllowedError(c.req.method, c.req.path);
  });
  app.route("/v1", v1);
  app.route(
    "/admin/v1",
    createAdminApp(services.tenancy, services.adminToken, {
      usage: services.usageQueries,
      catalogue: services.catalogue,
      throttle: adminThrottle,
      clientAddress: services.clientAddress,
      logger,
    }),
  );
  app.route(
    "/dashboard",
    createDashboardApp({
      tenancy: services.tenancy,
      logger,
      usage: services.usageQueries,
      limiter: services.limiter,
      models: () => services.engine.listModels(),
      health: () => services.engine.health(),
      catalogue: services.catalogue,
      adminToken: services.adminToken,
      redis: services.redis,
      clientAddress: services.clientAddress,
      operatorThrottle: adminThrottle,
      signInConcurrency: services.config.server.signInConcurrency,
      ...options.dashboard,
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
    // Only a failure nothing recognised (the generic 500) is a bug worth an error line with its stack. Expected
    // refusals such as 503 engine_overloaded are counted in metrics and logged by their request line: logging each
    // as an error would bury real faults under thousands of lines exactly when the server is overloaded.
    if (apiError instanceof InternalServerError && !(err instanceof ApiError)) {
      logger.error({ err, requestId: c.get("requestId") }, "unhandled error");
    }
    c.header("x-request-id", c.get("requestId"));
    return apiErrorResponse(c, apiError);
  });

  return app;
}

/** One model in /health's body: `status` ("ok" or why not) as before, the lifecycle fields beside it. */
function modelHealthWire(h: ModelHealth) {
  return {
    id: h.model,
    status: h.ready ? "ok" : (h.detail ?? "unavailable"),
    ...(h.gpuLayers === undefined ? {} : { gpu_layers: h.gpuLayers }),
    ...(h.engineBuild === undefined ? {} : { engine_build: h.engineBuild }),
    ...(h.state === undefined ? {} : { state: h.state }),
    ...(h.progress === undefined
      ? {}
      : {
          progress: {
            downloaded_bytes: h.progress.downloadedBytes,
            ...(h.progress.totalBytes === undefined ? {} : { total_bytes: h.progress.totalBytes }),
            load: h.progress.load,
          },
        }),
    ...(h.memory === undefined
      ? {}
      : { memory: { ram_bytes: h.memory.ramBytes, vram_bytes: h.memory.vramBytes } }),
    ...(h.error === undefined ? {} : { error: h.error }),
    ...(h.endpoints === undefined
      ? {}
      : {
          endpoints: h.endpoints.map((e) => ({
            url: e.url,
            status: e.healthy ? "ok" : "ejected",
            in_flight: e.inFlight,
            // The endpoint's prefix cache since start: its hit rate is cached ÷ prompt (docs/fleet.md).
            prompt_tokens: e.promptTokens,
            cached_tokens: e.cachedTokens,
            ...(e.lastError === undefined ? {} : { error: e.lastError }),
          })),
        }),
  };
}
