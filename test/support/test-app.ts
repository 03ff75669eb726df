// The whole app in memory for tests: the same service graph main.ts builds (buildServices → createApp), on PGlite
// or PostgreSQL, around the fake engine or a real one; requests go through `app.request()`, no port.
import { eq } from "drizzle-orm";
import type { Hono } from "hono";
import {
  type BuildServicesOptions,
  buildServices,
  type ServiceGraph,
  type Services,
} from "../../src/app/services.js";
import { isModelHost } from "../../src/catalogue/catalogue.js";
import { loadConfig } from "../../src/config/load.js";
import { RESPONSES_CONFIG_DEFAULTS, type ResponsesConfig } from "../../src/config/responses-settings.js";
import {
  type HearthConfig,
  type ModelConfig,
  modelConfigSchema,
  type ServerConfig,
} from "../../src/config/schema.js";
import type { Engine } from "../../src/engine/types.js";
import { type AppOptions, createApp } from "../../src/http/app.js";
import type { AppEnv } from "../../src/http/env.js";
import { createLogger, type Logger } from "../../src/observability/logger.js";
import type { Store } from "../../src/store/open-store.js";
import { type UsageRecordRow, usageRecords } from "../../src/store/schema.js";
import { DEFAULT_OWNER_EMAIL } from "../../src/tenancy/bootstrap.js";
import { FAKE_MODEL, FakeEngine, type FakeEngineOptions } from "./fake-engine.js";
import { type Backend, pgliteBackend, postgresBackend } from "./store-backends.js";

export const TEST_ADMIN_TOKEN = "hearth-admin-test-token-0123456789abcdef";
/** scrypt at a cost tests can afford (the default takes ~100 ms per password). */
export const FAST_SCRYPT = { N: 1 << 10, r: 8, p: 1 };

export interface TestAppOptions<E extends Engine> {
  /**
   * Builds the engine from the test's config (its `models`). Default: a FakeEngine over those models (context
   * size, parallel, queue bound and timeout taken from each model's config), with `fake` options.
   */
  engine?: (config: HearthConfig) => E;
  /** Options of the default FakeEngine (scripted reply, ready, step delay). */
  fake?: Omit<FakeEngineOptions, "models">;
  /** Default "pglite" (a copy of an initialised cluster in a fresh data dir); "postgres": a fresh database. */
  store?: "pglite" | "postgres";
  /** Configured models; missing fields take the config defaults. Default: one model, FAKE_MODEL. */
  models?: (Partial<ModelConfig> & { id: string })[];
  server?: Partial<ServerConfig>;
  /** Shared limits, throttles and invalidations in Redis (default: none, the memory limiter). */
  redisUrl?: string;
  /** Default TEST_ADMIN_TOKEN; null: none configured, the server creates `<dataDir>/admin-token` (first start). */
  adminToken?: string | null;
  /** metrics.token: /metrics then needs it as a Bearer token (default: none, /metrics is open). */
  metricsToken?: string;
  /** Default: silent. */
  logger?: Logger;
  /** Tenancy settings (clock, cache TTL). Default: FAST_SCRYPT passwords. */
  tenancy?: BuildServicesOptions["tenancy"];
  /** Dashboard sessions and throttles (createApp's options). */
  app?: AppOptions;
  /** Create org `default` with every model, its first key and owner, as the first start does (default true). */
  bootstrap?: boolean;
  /** Stored responses elsewhere than the store's table (e.g. a MemoryResponsesStore). */
  responses?: BuildServicesOptions["responses"];
  /** hearth.yaml's `responses:` block (retention in ms, bounds); missing fields take the defaults. */
  responsesConfig?: Partial<ResponsesConfig>;
}

export interface TestApp<E extends Engine> {
  app: Hono<AppEnv>;
  services: Services;
  store: Store;
  config: HearthConfig;
  engine: E;
  /** The bootstrap key of org `default` ("" with `bootstrap: false`). */
  apiKey: string;
  /** The first owner of org `default` (empty with `bootstrap: false`). */
  owner: { email: string; password: string };
  /** POST /v1/chat/completions with the bootstrap key (or `key`), as JSON. */
  chat(body: unknown, key?: string, init?: RequestInit): Promise<Response>;
  /** Disposes the service graph (usage, key uses, Redis, store) but keeps the data for inspection. */
  dispose(): Promise<void>;
  /** dispose(), the engine, and the data dir or database. */
  close(): Promise<void>;
}

/** A request's usage record (by its x-request-id), once the app's accounting and meter have written it. */
export async function usageRecordOf<E extends Engine>(
  harness: TestApp<E>,
  requestId: string,
): Promise<UsageRecordRow> {
  for (let i = 0; i < 200; i++) {
    await harness.services.accounting.settled();
    await harness.services.usageMeter.flush();
    const [row] = await harness.store.db
      .select()
      .from(usageRecords)
      .where(eq(usageRecords.requestId, requestId));
    if (row !== undefined) return row;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no usage record for ${requestId}`);
}

/** Starts the app. Always `close()` it (afterAll). */
export async function startTestApp<E extends Engine = FakeEngine>(
  options: TestAppOptions<E> = {},
): Promise<TestApp<E>> {
  const backend: Backend = options.store === "postgres" ? await postgresBackend() : await pgliteBackend();
  const config = testConfig(backend, options);
  const engine = options.engine?.(config) ?? (fakeEngineFor(config, options.fake) as unknown as E);
  const logger = options.logger ?? createLogger("silent");
  let graph: ServiceGraph;
  try {
    graph = await buildServices(config, {
      engine,
      ...(isModelHost(engine) ? { modelHost: engine } : {}),
      logger,
      tenancy: { passwordParams: FAST_SCRYPT, ...options.tenancy },
      ...(options.responses === undefined ? {} : { responses: options.responses }),
    });
  } catch (err) {
    await engine.dispose();
    await backend.cleanup();
    throw err;
  }
  const { services, store } = graph;
  const app = createApp(services, options.app);
  let apiKey = "";
  let owner = { email: "", password: "" };
  if (options.bootstrap ?? true) {
    const first = await services.tenancy.bootstrap(
      config.models.map((m) => m.id),
      { ownerEmail: DEFAULT_OWNER_EMAIL },
    );
    apiKey = first?.key ?? "";
    owner = first?.owner ?? owner;
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    services,
    store,
    config,
    engine,
    apiKey,
    owner,
    chat: (body, key = apiKey, init = {}) =>
      Promise.resolve(
        app.request("/v1/chat/completions", {
          method: "POST",
          ...init,
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            ...(init.headers as Record<string, string> | undefined),
          },
          body: JSON.stringify(body),
        }),
      ),
    dispose: () => graph.dispose(),
    close() {
      closing ??= (async () => {
        try {
          await engine.dispose();
          await graph.dispose();
        } finally {
          await backend.cleanup();
        }
      })();
      return closing;
    },
  };
}

function testConfig<E extends Engine>(backend: Backend, options: TestAppOptions<E>): HearthConfig {
  // The real loader's defaults (server, models dir) from this environment only, not the developer's.
  const base = loadConfig({
    env: {
      HEARTH_DATA_DIR: backend.options.dataDir,
      HEARTH_MODELS_DIR: process.env.HEARTH_MODELS_DIR ?? "",
    },
  });
  const models = (options.models ?? [{ id: FAKE_MODEL }]).map((m) =>
    modelConfigSchema.parse({ source: `/nonexistent/${m.id}.gguf`, ...m }),
  );
  return {
    ...base,
    server: { ...base.server, ...options.server },
    responses: { ...(base.responses ?? RESPONSES_CONFIG_DEFAULTS), ...options.responsesConfig },
    models,
    upstreamModels: [],
    modelIds: models.map((m) => m.id),
    databaseUrl: backend.options.databaseUrl,
    redisUrl: options.redisUrl,
    adminToken: options.adminToken === null ? undefined : (options.adminToken ?? TEST_ADMIN_TOKEN),
    metricsToken: options.metricsToken,
    logLevel: "silent",
  };
}

function fakeEngineFor(config: HearthConfig, fake: TestAppOptions<Engine>["fake"]): FakeEngine {
  return new FakeEngine({
    ...fake,
    models: config.models.map((m) => ({
      id: m.id,
      contextSize: m.contextSize,
      parallel: m.parallel,
      maxQueue: m.maxQueue,
      queueTimeoutMs: m.queueTimeoutMs,
    })),
  });
}
