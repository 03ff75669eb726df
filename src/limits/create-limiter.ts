// Builds the rate limiter the config asks for: in memory by default, Redis (shared by replicas) with HEARTH_REDIS_URL.
import type { Redis } from "ioredis";
import type { Logger } from "../observability/logger.js";
import { closeRedis, connectRedis } from "../store/redis.js";
import { OrgRateLimiter } from "./org-rate-limiter.js";
import type { RateLimiter } from "./types.js";
import { WindowStore } from "./window-store.js";

export const DEFAULT_KEY_PREFIX = "hearth:limits";

export interface RateLimiterOptions {
  /** Connect to this Redis (closed by dispose); ignored when `redis` is given. */
  redisUrl?: string | undefined;
  /** A connection shared with other users (see src/store/redis.ts); not closed by dispose. */
  redis?: Redis | undefined;
  logger: Logger;
  /** Redis keys are `<keyPrefix>:rpm:<orgId>` and `<keyPrefix>:tpm:<orgId>`; default `hearth:limits`. */
  keyPrefix?: string;
  /** Window length in seconds; default 60 (per minute). Tests shorten it. */
  windowSeconds?: number;
}

export function createRateLimiter({
  redisUrl,
  redis: shared,
  logger,
  keyPrefix = DEFAULT_KEY_PREFIX,
  windowSeconds,
}: RateLimiterOptions): RateLimiter {
  const window = windowSeconds === undefined ? {} : { windowSeconds };
  const redis = shared ?? (redisUrl === undefined ? undefined : connectRedis(redisUrl, logger));
  if (redis === undefined) {
    return new OrgRateLimiter({ windows: new WindowStore({ logger, keyPrefix, ...window }), logger });
  }
  return new OrgRateLimiter({
    windows: new WindowStore({ logger, keyPrefix, redis, ...window }),
    logger,
    // A connection given by the caller is the caller's to close.
    ...(shared === undefined ? { close: () => closeRedis(redis) } : {}),
  });
}
