// The typed services bag built once by main.ts (and by tests) and handed to createApp.
import type { Redis } from "ioredis";
import { Accounting } from "../api/accounting.js";
import type { HearthConfig } from "../config/schema.js";
import type { Engine } from "../engine/types.js";
import { createRateLimiter } from "../limits/create-limiter.js";
import type { RateLimiter } from "../limits/types.js";
import type { Logger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import type { StoreDb } from "../store/open-store.js";
import { closeRedis, connectRedis } from "../store/redis.js";
import { InvalidationBroadcast } from "../tenancy/invalidation-broadcast.js";
import type { TenancyService } from "../tenancy/tenancy-service.js";
import { PgUsageMeter, UsageRecordsDroppedError } from "../usage/pg-meter.js";
import { UsageQueries } from "../usage/queries.js";
import type { UsageMeter } from "../usage/types.js";

export interface Services {
  config: HearthConfig;
  engine: Engine;
  tenancy: TenancyService;
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
  /** True once the store is open and migrated. */
  storeReady: () => boolean;
  /** True once SIGTERM started the drain: /health answers 503 so balancers stop sending. */
  draining: () => boolean;
}

export interface ServiceParts {
  config: HearthConfig;
  engine: Engine;
  tenancy: TenancyService;
  db: StoreDb;
  adminToken: string;
  logger: Logger;
  draining?: () => boolean;
}

/** Builds the limiter, usage meter, metrics and accounting around the engine, tenancy and store. */
export function createServices(parts: ServiceParts): Services {
  const { config, engine, tenancy, db, adminToken, logger } = parts;
  const usageMeter = new PgUsageMeter(db, {
    onError: (err) =>
      err instanceof UsageRecordsDroppedError
        ? logger.error({ err, dropped: err.count }, "usage records dropped")
        : logger.warn({ err }, "writing usage records failed; will retry"),
  });
  const metrics = new Metrics(engine);
  const redis = config.redisUrl === undefined ? undefined : connectRedis(config.redisUrl, logger);
  return {
    config,
    engine,
    tenancy,
    adminToken,
    logger,
    limiter: createRateLimiter({ redis, logger }),
    redis,
    invalidations: redis === undefined ? undefined : new InvalidationBroadcast(tenancy, { redis, logger }),
    usageMeter,
    usageQueries: new UsageQueries(db),
    metrics,
    accounting: new Accounting({ usageMeter, metrics, logger }),
    storeReady: () => true,
    draining: parts.draining ?? (() => false),
  };
}

/** Releases what createServices made (after the engine has drained and before the store closes). */
export async function disposeServices(services: Services): Promise<void> {
  await services.accounting.settled();
  await services.usageMeter.dispose(); // every admitted request's record is written before the store closes
  await services.limiter.dispose();
  await services.invalidations?.close();
  if (services.redis !== undefined) await closeRedis(services.redis);
}
