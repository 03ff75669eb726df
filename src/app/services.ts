// The composition root's one builder: the typed services bag over the store, built the same way by main.ts and tests.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { adminTokenPath, loadOrCreateAdminToken } from "../auth/admin-token.js";
import { KEY_SECRET_FILE, loadOrCreateKeySecret } from "../auth/key-secret.js";
import { accessByOthers } from "../auth/secret-file.js";
import { ModelCatalogue, type ModelHost } from "../catalogue/catalogue.js";
import { Accounting } from "../completions/accounting.js";
import { CompletionsService } from "../completions/completions-service.js";
import { ModelAccess } from "../completions/model-access.js";
import { RESPONSES_CONFIG_DEFAULTS } from "../config/responses-settings.js";
import { type HearthConfig, STORE_CONFIG_DEFAULTS } from "../config/schema.js";
import type { Engine } from "../engine/types.js";
import { type ClientAddress, createClientAddress } from "../http/client-address.js";
import { createRateLimiter } from "../limits/create-limiter.js";
import type { RateLimiter } from "../limits/types.js";
import type { Logger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { PgResponsesStore } from "../responses/pg-store.js";
import { ResponsesSweep, sweepIntervalMs } from "../responses/sweep.js";
import type { ResponsesStore } from "../responses/types.js";
import { openStore, type Store, type StoreDb } from "../store/open-store.js";
import { closeRedis, connectRedis } from "../store/redis.js";
import { StoreStatus } from "../store/store-status.js";
import { InvalidationBroadcast } from "../tenancy/invalidation-broadcast.js";
import { cacheTtlMsFor, createTenancy, type Tenancy, type TenancyOptions } from "../tenancy/tenancy.js";
import { PgUsageMeter, UsageRecordsDroppedError } from "../usage/pg-meter.js";
import { UsageQueries } from "../usage/queries.js";
import type { UsageMeter } from "../usage/types.js";
import { firstStartCredentialsPath } from "./first-start.js";

export interface Services {
  config: HearthConfig;
  engine: Engine;
  tenancy: Tenancy;
  adminToken: string;
  logger: Logger;
  limiter: RateLimiter;
  /** One Redis connection (HEARTH_REDIS_URL) for rate limits, sign-in throttles and the invalidation broadcast. */
  redis: Redis | undefined;
  /** With Redis: revocations and limit or grant changes reach the other replicas' caches at once. */
  invalidations: InvalidationBroadcast | undefined;
  usageMeter: UsageMeter;
  /** Usage summaries for the CLI, the admin API and the dashboard. */
  usageQueries: UsageQueries;
  metrics: Metrics;
  /** Usage, limit settlement and token metrics of every admitted chat completion. */
  accounting: Accounting;
  /** Which models a caller may use: /v1/models and every completion. */
  modelAccess: ModelAccess;
  /** Chat completions from a validated request to a metered generation (access, prepare, limits, queue). */
  completions: CompletionsService;
  /** Stored responses of the Responses API, per organization (the store's, unless a test gave its own). */
  responses: ResponsesStore;
  /**
   * The embedded models added, removed, loaded and unloaded at run time (stored, broadcast to the replicas); absent
   * when no embedded engine was given (an engine that cannot change its models).
   */
  catalogue: ModelCatalogue | undefined;
  /** Whether the store answers (one ping, cached ~1 s and bounded by a timeout, shared by every caller). */
  storeReady: () => Promise<boolean>;
  /** True once SIGTERM started the drain: /health answers 503 so balancers stop sending. */
  draining: () => boolean;
  /** The client's address (server.trustedProxies): the one answer for throttles and logs. */
  clientAddress: ClientAddress;
}

export interface BuildServicesOptions {
  engine: Engine;
  /** The embedded engine inside `engine`, whose models the catalogue changes at run time (default: none). */
  modelHost?: ModelHost;
  logger: Logger;
  /** True once SIGTERM started the drain (default: never). */
  draining?: () => boolean;
  /** Tenancy settings tests change (clock, scrypt cost, cache TTL); the server keeps the defaults. */
  tenancy?: Pick<TenancyOptions, "now" | "passwordParams" | "cacheTtlMs" | "staleIfErrorMs">;
  /** Stored responses somewhere else than the store (tests: the memory store). Default: the store's table. */
  responses?: ResponsesStore;
}

/** The services and what they stand on, with one dispose for everything buildServices opened. */
export interface ServiceGraph {
  services: Services;
  store: Store;
  /**
   * After the engine has drained: settles accounting, writes pending usage records and key uses, closes Redis
   * and the store. Later calls return the first call's promise.
   */
  dispose(): Promise<void>;
}

/**
 * Opens the store (PGlite in the data dir, or PostgreSQL) and builds every service on it around the given engine.
 * The engine is the caller's: it starts, drains and disposes it.
 */
export async function buildServices(
  config: HearthConfig,
  options: BuildServicesOptions,
): Promise<ServiceGraph> {
  const { engine, logger } = options;
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  // First, so a token too short to start with is refused before the store is opened.
  const adminToken = loadOrCreateAdminToken(config);
  const storeConfig = config.store ?? STORE_CONFIG_DEFAULTS;
  const store = await openStore({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    timeouts: storeConfig,
  });
  const storeStatus = new StoreStatus(() => store.ping(), {
    cacheMs: storeConfig.healthCacheMs,
    timeoutMs: storeConfig.healthTimeoutMs,
    onChange: (up, err) =>
      up
        ? logger.info("the store answers again")
        : logger.error({ err }, "the store is unavailable: serving recently verified keys only"),
  });
  let tenancy: Tenancy;
  let services: Services;
  try {
    tenancy = createTenancy(store.db, {
      keySecret: loadOrCreateKeySecret(config),
      // Upstream models too: they are granted like embedded ones; and models added at run time.
      modelIds: () => engine.listModels().map((m) => m.id),
      onBackgroundError: (err) => logger.warn({ err }, "writing API key last-used times failed; will retry"),
      storeStatus,
      staleIfErrorMs: storeConfig.staleKeysMs,
      cacheTtlMs: cacheTtlMsFor(store.driver),
      ...options.tenancy,
    });
    warnAboutExposedSecrets(config, logger);
    services = createServices({
      config,
      engine,
      tenancy,
      db: store.db,
      adminToken,
      logger,
      storeReady: () => storeStatus.check(),
      ...(options.draining === undefined ? {} : { draining: options.draining }),
      ...(options.modelHost === undefined ? {} : { modelHost: options.modelHost }),
      ...(options.responses === undefined ? {} : { responses: options.responses }),
    });
    // The models added or removed at run time, before the engine starts loading.
    await services.catalogue?.sync();
  } catch (err) {
    storeStatus.stop();
    await store.close();
    throw err;
  }
  const sweep = startResponsesSweep(services);
  let disposing: Promise<void> | undefined;
  const dispose = () => {
    disposing ??= (async () => {
      await sweep.stop(); // a sweep under way ends before the store closes
      await disposeServices(services);
      await tenancy.dispose(); // writes the coalesced last_used_at times before the store closes
      await store.close();
    })();
    return disposing;
  };
  return { services, store, dispose };
}

/**
 * Warns (once, at start) about the data dir and the secret files in it when the group or other users of the
 * machine can read them: they hold the admin token, the key secret, password hashes and the first credentials.
 */
function warnAboutExposedSecrets(config: HearthConfig, logger: Logger): void {
  const paths = [
    config.dataDir,
    config.adminToken === undefined ? adminTokenPath(config) : undefined,
    config.keySecret === undefined ? join(config.dataDir, KEY_SECRET_FILE) : undefined,
    firstStartCredentialsPath(config.dataDir),
  ];
  for (const path of paths) {
    if (path === undefined) continue;
    const mode = accessByOthers(path);
    if (mode === undefined) continue;
    const want = path === config.dataDir ? "700" : "600";
    logger.warn(
      { path, mode: mode.toString(8).padStart(3, "0") },
      `${path} can be read by other users of this machine; it holds secrets: chmod ${want} it`,
    );
  }
}

interface ServiceParts {
  config: HearthConfig;
  engine: Engine;
  tenancy: Tenancy;
  db: StoreDb;
  adminToken: string;
  logger: Logger;
  storeReady: () => Promise<boolean>;
  draining?: () => boolean;
  modelHost?: ModelHost;
  responses?: ResponsesStore;
}

/** Builds the limiter, usage meter, metrics and accounting around the engine, tenancy and store. */
function createServices(parts: ServiceParts): Services {
  const { config, engine, tenancy, db, adminToken, logger } = parts;
  const usageMeter = new PgUsageMeter(db, {
    onError: (err) =>
      err instanceof UsageRecordsDroppedError
        ? logger.error({ err, dropped: err.count }, "usage records dropped")
        : logger.warn({ err }, "writing usage records failed; will retry"),
  });
  const metrics = new Metrics(engine);
  const redis = config.redisUrl === undefined ? undefined : connectRedis(config.redisUrl, logger);
  const limiter = createRateLimiter({ redis, logger });
  const accounting = new Accounting({ usageMeter, metrics, logger });
  const modelAccess = new ModelAccess(engine, (orgId) => tenancy.orgs.allowedModels(orgId));
  return {
    config,
    engine,
    tenancy,
    adminToken,
    logger,
    limiter,
    redis,
    invalidations: redis === undefined ? undefined : new InvalidationBroadcast(tenancy, { redis, logger }),
    usageMeter,
    usageQueries: new UsageQueries(db),
    metrics,
    accounting,
    modelAccess,
    completions: new CompletionsService({ engine, access: modelAccess, limiter, accounting }),
    responses: parts.responses ?? new PgResponsesStore(db),
    catalogue:
      parts.modelHost === undefined
        ? undefined
        : new ModelCatalogue(db, {
            host: parts.modelHost,
            seed: config.models,
            servedIds: () => engine.listModels().map((m) => m.id),
            invalidation: tenancy.invalidation,
            logger,
          }),
    storeReady: parts.storeReady,
    draining: parts.draining ?? (() => false),
    clientAddress: createClientAddress(config.server.trustedProxies),
  };
}

/** Removes expired stored responses every hour (sooner for a short retention); the first run a minute after start. */
function startResponsesSweep(services: Services): ResponsesSweep {
  const { logger } = services;
  const intervalMs = sweepIntervalMs((services.config.responses ?? RESPONSES_CONFIG_DEFAULTS).retention);
  return new ResponsesSweep({
    removeExpired: (now) => services.responses.removeExpired(now),
    intervalMs,
    firstDelayMs: Math.min(intervalMs, 60_000),
    onRemoved: (count) => logger.info({ count }, "expired stored responses removed"),
    onError: (err) => logger.warn({ err }, "removing expired stored responses failed; will retry"),
  });
}

/** Releases what createServices made (after the engine has drained and before the store closes). */
async function disposeServices(services: Services): Promise<void> {
  await services.accounting.settled();
  await services.usageMeter.dispose(); // every admitted request's record is written before the store closes
  await services.limiter.dispose();
  await services.invalidations?.close();
  if (services.redis !== undefined) await closeRedis(services.redis);
}
